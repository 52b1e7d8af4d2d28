-- +goose Up

-- The timeline of a delivery (herald trace, GET /api/notifications/{id}, the console): every
-- status change with the database time it happened, recorded by the delivery_touch trigger
-- that already runs on every write, so that no transition's SQL changes and no transition
-- can forget it. Two parallel arrays on the row itself rather than a table of transitions:
-- the row is rewritten by every transition anyway, so an entry costs about 20 bytes in that
-- tuple and no extra insert, index entry or round trip. The insert path is unchanged (NULL:
-- the row's created_at is its PENDING time).
--
-- A delivery deferred many times (rate limits) changes status twice per deferral, so the
-- arrays are bounded: past transition_cap entries the oldest after the first is dropped. A
-- timeline keeps how it began and how it ended.
ALTER TABLE delivery ADD COLUMN transition_status text[];
ALTER TABLE delivery ADD COLUMN transition_at timestamptz[];

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION delivery_touch() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    transition_cap constant int := 32;
BEGIN
    NEW.updated_at := now();
    IF TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status THEN
        IF coalesce(cardinality(OLD.transition_status), 0) >= transition_cap THEN
            NEW.transition_status := OLD.transition_status[1:1] || OLD.transition_status[3:];
            NEW.transition_at := OLD.transition_at[1:1] || OLD.transition_at[3:];
        END IF;
        NEW.transition_status := coalesce(NEW.transition_status, '{}') || NEW.status;
        NEW.transition_at := coalesce(NEW.transition_at, '{}') || now();
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- The console's send rate per provider reads the attempts that finished in the last minute.
-- A BRIN index: attempt rows are appended in about finished_at order, so a few block ranges
-- cover the last minute, and keeping the index costs next to nothing on the insert path (a
-- B-tree here would be one more index entry per attempt).
CREATE INDEX delivery_attempt_finished_brin ON delivery_attempt USING brin (finished_at);

-- +goose Down
DROP INDEX delivery_attempt_finished_brin;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION delivery_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
ALTER TABLE delivery DROP COLUMN transition_at;
ALTER TABLE delivery DROP COLUMN transition_status;
