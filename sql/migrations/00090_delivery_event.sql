-- +goose Up

-- The status-event outbox (docs/events.md). Every client-visible change of a delivery writes
-- one row here in the transaction of the change, so that an event exists iff its change
-- committed; the relay streams the inserts to Kafka over the delivery slot. Partitioned by
-- RANGE on the event's UUIDv7 id, one partition per UTC day like delivery: a day's events
-- are dropped with that day's partitions of the other tables. traceparent is the delivery's
-- (the Kafka record carries it); it is not part of the event data.
CREATE TABLE delivery_event (
    id              uuid        NOT NULL,
    type            text        NOT NULL,
    client_id       uuid        NOT NULL,
    notification_id uuid        NOT NULL,
    delivery_id     uuid        NOT NULL,
    occurred_at     timestamptz NOT NULL,
    data            jsonb       NOT NULL,
    traceparent     text,
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);

-- A client's events in order, for replay.
CREATE INDEX delivery_event_client ON delivery_event (client_id, id);

-- The sequence of an event (EventData.sequence). One counter for every delivery: the events
-- of one delivery are written under that delivery's row lock, one transaction after the
-- other, so each takes a later value than the one before. CACHE 1 (the default) keeps the
-- values in the order they are taken whatever the session.
CREATE SEQUENCE delivery_event_sequence CACHE 1;

-- herald_uuidv7 is a UUIDv7 of the database clock (clock_timestamp, milliseconds) with 74
-- random bits, the form of herald's ids.
-- +goose StatementBegin
CREATE FUNCTION herald_uuidv7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                  PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                  FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
-- +goose StatementEnd

-- herald_create_partitions now also creates the day's delivery_event partition (the rest is
-- migration 00060's function unchanged).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION herald_create_partitions(day date) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    s  text := to_char(day, 'YYYYMMDD');
    lo uuid := herald_day_bound(day);
    hi uuid := herald_day_bound(day + 1);
    r  record;
BEGIN
    IF to_regclass('notification_' || s) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF notification FOR VALUES FROM (%L) TO (%L)', 'notification_' || s, lo, hi);
    END IF;
    IF to_regclass('delivery_' || s) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF delivery FOR VALUES FROM (%L) TO (%L)', 'delivery_' || s, lo, hi);
    END IF;
    IF to_regclass('delivery_attempt_' || s) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF delivery_attempt FOR VALUES FROM (%L) TO (%L)', 'delivery_attempt_' || s, lo, hi);
    END IF;
    IF to_regclass('delivery_event_' || s) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF delivery_event FOR VALUES FROM (%L) TO (%L)', 'delivery_event_' || s, lo, hi);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = ('delivery_attempt_' || s)::regclass
                                                 AND conname = 'delivery_attempt_' || s || '_delivery_fkey') THEN
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (delivery_id) REFERENCES %I (id) ON DELETE CASCADE',
                       'delivery_attempt_' || s, 'delivery_attempt_' || s || '_delivery_fkey', 'delivery_' || s);
    END IF;
    FOR r IN
        SELECT c.relname AS child, p.relname AS parent
          FROM pg_index x
          JOIN pg_class c ON c.oid = x.indexrelid
          JOIN pg_inherits i ON i.inhrelid = x.indexrelid
          JOIN pg_class p ON p.oid = i.inhparent
         WHERE x.indrelid IN (('notification_' || s)::regclass, ('delivery_' || s)::regclass,
                              ('delivery_attempt_' || s)::regclass, ('delivery_event_' || s)::regclass)
           AND c.relname <> left(p.relname, 54) || '_' || s
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', r.child, left(r.parent, 54) || '_' || s);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- Every day that has delivery partitions gets its delivery_event partition.
-- +goose StatementBegin
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT substring(c.relname FROM '[0-9]{8}$') AS s
               FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'delivery'::regclass AND c.relname ~ '^delivery_[0-9]{8}$' LOOP
        PERFORM herald_create_partitions(to_date(r.s, 'YYYYMMDD'));
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- Every publication of the delivery table (the relay's) carries the outbox too, so that a
-- relay streaming while this migration runs goes on with the events without a restart (the
-- relay adds the table itself when it creates or finds a publication without it).
-- +goose StatementBegin
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT p.pubname FROM pg_publication p JOIN pg_publication_rel pr ON pr.prpubid = p.oid
              WHERE pr.prrelid = 'delivery'::regclass LOOP
        EXECUTE format('ALTER PUBLICATION %I ADD TABLE delivery_event', r.pubname);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- herald_event_enabled: event writing is on unless the session says herald.events = off
-- (herald serve --events=false sets it on its connections; docs/events.md).
-- +goose StatementBegin
CREATE FUNCTION herald_event_enabled() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('herald.events', true), '') <> 'off'
$$;
-- +goose StatementEnd

-- herald_write_event writes one event of delivery d (its row after the change) of type t,
-- with the given data fields beside the ones every event has. client_id is the
-- notification's.
-- +goose StatementBegin
CREATE FUNCTION herald_write_event(t text, d delivery, extra jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    client uuid;
BEGIN
    SELECT n.client_id INTO STRICT client FROM notification n WHERE n.id = d.notification_id;
    INSERT INTO delivery_event (id, type, client_id, notification_id, delivery_id, occurred_at, data, traceparent)
    VALUES (herald_uuidv7(), t, client, d.notification_id, d.id, now(),
            jsonb_build_object('notificationId', d.notification_id, 'deliveryId', d.id,
                               'channel', d.channel, 'priority', d.priority, 'status', d.status,
                               'attempt', d.attempts, 'sequence', nextval('delivery_event_sequence'),
                               'occurredAt', now()) || jsonb_strip_nulls(extra),
            d.traceparent);
END;
$$;
-- +goose StatementEnd

-- delivery_status_event: a delivery's status changed to a client-visible one (SENT and
-- everything after it, FAILED, EXPIRED, CANCELLED, or any status added later that is not
-- one of the internal PENDING, QUEUED, SENDING): one event, herald.delivery.<status in
-- lower case>. A trigger on the status itself, so that no transition, present or future,
-- can change a status without its event. The error of a FAILED delivery is its last
-- attempt's (class) and the provider's code or herald's reason (code).
-- +goose StatementBegin
CREATE FUNCTION delivery_status_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d     delivery;
    a     delivery_attempt;
    extra jsonb := '{}';
BEGIN
    IF NOT herald_event_enabled() THEN
        RETURN NULL;
    END IF;
    d := NEW; -- NEW is the partition's row type
    IF NEW.status NOT IN ('EXPIRED', 'CANCELLED') THEN
        extra := jsonb_build_object('provider', NEW.provider, 'providerMessageId', NEW.provider_message_id);
    END IF;
    CASE NEW.status
    WHEN 'FAILED' THEN
        SELECT * INTO a FROM delivery_attempt WHERE delivery_id = NEW.id AND attempt = NEW.attempts;
        extra := extra || jsonb_build_object('error', jsonb_strip_nulls(jsonb_build_object(
            'class', lower(a.outcome), 'code', coalesce(a.provider_code, NEW.last_error))));
    WHEN 'UNDELIVERED' THEN
        -- The receipt that refined SENT is the last one logged (migration 00080's receipts);
        -- read through to_jsonb so that this function does not depend on the column.
        extra := extra || jsonb_build_object('error', jsonb_build_object('code', coalesce(
            nullif(to_jsonb(NEW)->'receipts'->-1->>'code', ''), NEW.last_error, 'undelivered')));
    WHEN 'EXPIRED', 'CANCELLED' THEN
        extra := extra || jsonb_build_object('error', jsonb_build_object('code', coalesce(NEW.last_error, lower(NEW.status))));
    ELSE NULL;
    END CASE;
    PERFORM herald_write_event('herald.delivery.' || lower(NEW.status), d, extra);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- Deferred to the commit: the events of a transaction's status changes are written after
-- its attempt events, so that an attempt_failed comes before the failed it led to. Fired at
-- commit, still in the transaction.
CREATE CONSTRAINT TRIGGER delivery_status_event AFTER UPDATE OF status ON delivery
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status NOT IN ('PENDING', 'QUEUED', 'SENDING'))
    EXECUTE FUNCTION delivery_status_event();

-- delivery_attempt_event: an attempt failed (TRANSIENT, PERMANENT or AMBIGUOUS): one
-- herald.delivery.attempt_failed, retryable when the delivery went back to PENDING. An
-- AFTER trigger sees the delivery row the same statement changed.
-- +goose StatementBegin
CREATE FUNCTION delivery_attempt_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d delivery;
BEGIN
    IF NOT herald_event_enabled() THEN
        RETURN NULL;
    END IF;
    SELECT * INTO STRICT d FROM delivery WHERE id = NEW.delivery_id;
    PERFORM herald_write_event('herald.delivery.attempt_failed', d, jsonb_build_object(
        'attempt', NEW.attempt, 'provider', NEW.provider,
        'retryable', d.status IN ('PENDING', 'QUEUED'),
        'error', jsonb_strip_nulls(jsonb_build_object('class', lower(NEW.outcome),
                                                      'code', coalesce(NEW.provider_code, NEW.error)))));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER delivery_attempt_event AFTER INSERT ON delivery_attempt
    FOR EACH ROW WHEN (NEW.outcome IN ('TRANSIENT', 'PERMANENT', 'AMBIGUOUS'))
    EXECUTE FUNCTION delivery_attempt_event();

-- +goose Down
DROP TRIGGER delivery_attempt_event ON delivery_attempt;
DROP TRIGGER delivery_status_event ON delivery;
DROP FUNCTION delivery_attempt_event();
DROP FUNCTION delivery_status_event();
DROP FUNCTION herald_write_event(text, delivery, jsonb);
DROP FUNCTION herald_event_enabled();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION herald_create_partitions(day date) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    s  text := to_char(day, 'YYYYMMDD');
    lo uuid := herald_day_bound(day);
    hi uuid := herald_day_bound(day + 1);
    r  record;
BEGIN
    IF to_regclass('notification_' || s) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF notification FOR VALUES FROM (%L) TO (%L)', 'notification_' || s, lo, hi);
    END IF;
    IF to_regclass('delivery_' || s) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF delivery FOR VALUES FROM (%L) TO (%L)', 'delivery_' || s, lo, hi);
    END IF;
    IF to_regclass('delivery_attempt_' || s) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF delivery_attempt FOR VALUES FROM (%L) TO (%L)', 'delivery_attempt_' || s, lo, hi);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = ('delivery_attempt_' || s)::regclass
                                                 AND conname = 'delivery_attempt_' || s || '_delivery_fkey') THEN
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (delivery_id) REFERENCES %I (id) ON DELETE CASCADE',
                       'delivery_attempt_' || s, 'delivery_attempt_' || s || '_delivery_fkey', 'delivery_' || s);
    END IF;
    FOR r IN
        SELECT c.relname AS child, p.relname AS parent
          FROM pg_index x
          JOIN pg_class c ON c.oid = x.indexrelid
          JOIN pg_inherits i ON i.inhrelid = x.indexrelid
          JOIN pg_class p ON p.oid = i.inhparent
         WHERE x.indrelid IN (('notification_' || s)::regclass, ('delivery_' || s)::regclass,
                              ('delivery_attempt_' || s)::regclass)
           AND c.relname <> left(p.relname, 54) || '_' || s
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', r.child, left(r.parent, 54) || '_' || s);
    END LOOP;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION herald_uuidv7();
DROP SEQUENCE delivery_event_sequence;
DROP TABLE delivery_event;
