-- +goose Up

-- The retry an attempt scheduled: set on attempts that put the delivery back to PENDING
-- (transient or retried ambiguous outcomes), NULL otherwise. It makes the backoff schedule
-- visible in the attempt log without reconstructing it from the delivery's later updates.
ALTER TABLE delivery_attempt ADD COLUMN next_attempt_at timestamptz;

-- +goose Down
ALTER TABLE delivery_attempt DROP COLUMN next_attempt_at;
