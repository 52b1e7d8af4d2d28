-- +goose Up

-- The event of a send (SENDING → SENT) is written by the statement that records the send
-- (internal/delivery's outcome statement), one INSERT for every send of a batch, rather than by
-- the row trigger at commit, one INSERT routed into the partitioned outbox per event
-- (docs/events.md, "Who writes an event"). The statement says so for its transaction with
-- herald.outcome_events = 'statement' (set_config, local to the transaction) before it
-- changes a row; the trigger then leaves the sends of that transaction to it. A session that
-- never says so (a binary from before this migration, psql) still gets every event from the
-- trigger, so the migration and the binaries may roll out in either order.
DROP TRIGGER delivery_status_event ON delivery;
CREATE CONSTRAINT TRIGGER delivery_status_event AFTER UPDATE OF status ON delivery
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status NOT IN ('PENDING', 'QUEUED', 'SENDING')
          AND NOT (NEW.status = 'SENT' AND current_setting('herald.outcome_events', true) IS NOT DISTINCT FROM 'statement'))
    EXECUTE FUNCTION delivery_status_event();

-- +goose Down
DROP TRIGGER delivery_status_event ON delivery;
CREATE CONSTRAINT TRIGGER delivery_status_event AFTER UPDATE OF status ON delivery
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status NOT IN ('PENDING', 'QUEUED', 'SENDING'))
    EXECUTE FUNCTION delivery_status_event();
