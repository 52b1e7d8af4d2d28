-- +goose Up

-- The sweeper publishes due PENDING rows highest priority first (internal/delivery's Due):
-- one range scan per priority over (priority, next_attempt_at), so that a HIGH retry is in
-- the first batch however many LOW rows are due. It replaces delivery_pending_due, which
-- only ordered by next_attempt_at.
CREATE INDEX delivery_pending_by_priority ON delivery (priority, next_attempt_at) WHERE status = 'PENDING';
DROP INDEX delivery_pending_due;

-- The sweeper ends PENDING rows past their expires_at EXPIRED (ExpireDue) without waiting
-- for them to become due: a scan of PENDING rows that have an expiry, oldest first.
CREATE INDEX delivery_pending_expiry ON delivery (expires_at) WHERE status = 'PENDING' AND expires_at IS NOT NULL;

-- +goose Down
DROP INDEX delivery_pending_expiry;
CREATE INDEX delivery_pending_due ON delivery (next_attempt_at) WHERE status = 'PENDING';
DROP INDEX delivery_pending_by_priority;
