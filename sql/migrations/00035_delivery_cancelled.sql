-- +goose Up

-- CANCELLED: a final status for deliveries whose notification or campaign was cancelled
-- before a worker took them (internal/delivery's Cancel: from PENDING or QUEUED only). The
-- provider is never called, so no attempt row is written and delivery_attempt.outcome keeps
-- its list. The check is replaced NOT VALID and then validated, so that the validation scan
-- does not block writes to the table.
ALTER TABLE delivery DROP CONSTRAINT delivery_status_check;
ALTER TABLE delivery ADD CONSTRAINT delivery_status_check
    CHECK (status IN ('PENDING', 'QUEUED', 'SENDING', 'SENT', 'FAILED', 'EXPIRED', 'CANCELLED')) NOT VALID;
ALTER TABLE delivery VALIDATE CONSTRAINT delivery_status_check;

-- +goose Down
ALTER TABLE delivery DROP CONSTRAINT delivery_status_check;
ALTER TABLE delivery ADD CONSTRAINT delivery_status_check
    CHECK (status IN ('PENDING', 'QUEUED', 'SENDING', 'SENT', 'FAILED', 'EXPIRED')) NOT VALID;
