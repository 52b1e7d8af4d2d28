-- +goose Up

-- Provider receipts (docs/receipts.md): a provider that reports what became of a message it
-- accepted refines SENT to DELIVERED or UNDELIVERED (internal/delivery's ApplyReceipt, from
-- SENT only). Both are final. SENT stays the outcome counted by the final-outcome metric,
-- retention and a campaign's DONE; the receipt refines it. The check is replaced NOT VALID and
-- then validated, so that the validation scan does not block writes.
ALTER TABLE delivery DROP CONSTRAINT delivery_status_check;
ALTER TABLE delivery ADD CONSTRAINT delivery_status_check
    CHECK (status IN ('PENDING', 'QUEUED', 'SENDING', 'SENT', 'FAILED', 'EXPIRED', 'CANCELLED',
                      'DELIVERED', 'UNDELIVERED')) NOT VALID;
ALTER TABLE delivery VALIDATE CONSTRAINT delivery_status_check;

-- The receipts a delivery received, oldest first: a JSON array of
-- {"provider", "status", "code", "at", "receivedAt", "applied"}, appended by ApplyReceipt
-- (duplicates and late receipts included, at most 16 entries) for the timeline and the API.
-- Nullable without a default: PostgreSQL adds it without rewriting any partition, and it
-- goes with the delivery's day partition.
ALTER TABLE delivery ADD COLUMN receipts jsonb;

-- Receipts that came before herald recorded the send (the provider answered the callback
-- before herald's own commit), or for a delivery id herald does not know: kept until
-- expires_at (--receipt-hold) and applied when the send is recorded (dispatch, right after
-- the outcome's commit) or by the receipts sweeper. Not partitioned: it holds minutes of
-- rare receipts. No foreign key: an unknown id is held too. One row per delivery, provider
-- status and code: a duplicate changes nothing.
CREATE TABLE receipt_hold (
    delivery_id  uuid        NOT NULL,
    provider     text        NOT NULL,
    status       text        NOT NULL,  -- the provider's own status word
    code         text        NOT NULL DEFAULT '',
    result       text        NOT NULL CHECK (result IN ('DELIVERED', 'UNDELIVERED', 'INFO')),
    at           timestamptz NOT NULL,  -- the provider's event time (its receipt's clock)
    received_at  timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (delivery_id, provider, status, code)
);
CREATE INDEX receipt_hold_expires ON receipt_hold (expires_at);

-- +goose Down
DROP TABLE receipt_hold;
ALTER TABLE delivery DROP COLUMN receipts;
ALTER TABLE delivery DROP CONSTRAINT delivery_status_check;
ALTER TABLE delivery ADD CONSTRAINT delivery_status_check
    CHECK (status IN ('PENDING', 'QUEUED', 'SENDING', 'SENT', 'FAILED', 'EXPIRED', 'CANCELLED')) NOT VALID;
