-- +goose Up

-- Daily partitions (docs/architecture.md, "Partitions and retention"). notification and
-- delivery are partitioned by RANGE on their UUIDv7 id, delivery_attempt on its delivery_id,
-- with one partition per UTC day: a UUIDv7 begins with its creation time in unix
-- milliseconds (48 bits), so the bounds of day D are the uuids whose first 48 bits are the
-- milliseconds of D's midnight and the rest zero. WHERE id = $1 prunes to one partition and
-- the primary key stays id. An attempt always lands in the day of its delivery.
--
-- The conversion is generic: it copies whatever columns, checks, indexes and triggers the
-- tables have when it runs (columns added by earlier migrations come along), under ACCESS
-- EXCLUSIVE locks on the three tables for the whole copy.

-- herald_day_bound is the lowest UUIDv7 of a UTC day.
-- +goose StatementBegin
CREATE FUNCTION herald_day_bound(day date) RETURNS uuid LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT (lpad(to_hex((extract(epoch FROM day::timestamp) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid
$$;
-- +goose StatementEnd

-- herald_uuid_day is the UTC day in which a UUIDv7 was made.
-- +goose StatementBegin
CREATE FUNCTION herald_uuid_day(id uuid) RETURNS date LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT (to_timestamp((('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint) / 1000.0)
            AT TIME ZONE 'UTC')::date
$$;
-- +goose StatementEnd

-- herald_create_partitions creates the partitions of day (UTC) of the three tables, if
-- missing: notification_YYYYMMDD, delivery_YYYYMMDD, delivery_attempt_YYYYMMDD. Their
-- indexes are named after the parent's index and the day (delivery_pending_by_priority_
-- YYYYMMDD), so that plans read the same whatever the day. An attempt's foreign key is per
-- day (delivery_attempt_D references delivery_D), so that a day's partitions are dropped
-- without a check that scans other days. herald's partition job (internal/partition) calls
-- it for the days ahead. On partitions that exist it adds what is missing of the above.
-- +goose StatementBegin
CREATE FUNCTION herald_create_partitions(day date) RETURNS void LANGUAGE plpgsql AS $$
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

-- Idempotency keys move to a table of their own: a unique constraint of a partitioned table
-- must contain the partition key, so UNIQUE (client_id, idempotency_key) cannot stay on
-- notification. The insert claims the key here first (ON CONFLICT DO NOTHING) and writes the
-- notification only when it got it. Keys are deleted with their notification's partition.
CREATE TABLE idempotency_key (
    client_id       uuid        NOT NULL REFERENCES api_client (id),
    idempotency_key text        NOT NULL,
    notification_id uuid        NOT NULL,
    request_hash    bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, idempotency_key)
);
-- Retention deletes a dropped day's keys by notification id range.
CREATE INDEX idempotency_key_notification ON idempotency_key (notification_id);

-- +goose StatementBegin
DO $$
DECLARE
    tbl       text;
    key       text;
    d         date;
    r         record;
    idx       text[] := '{}';   -- index and constraint DDL to run on the new tables
    trg       text[] := '{}';   -- trigger DDL
    fks       text[] := '{}';   -- foreign keys to recreate
    pubs      text[] := '{}';   -- ALTER PUBLICATION statements
    stmt      text;
BEGIN
    -- Ids must be UUIDv7 (version nibble 7) for their day to mean anything.
    IF EXISTS (SELECT 1 FROM notification WHERE substr(id::text, 15, 1) <> '7')
       OR EXISTS (SELECT 1 FROM delivery WHERE substr(id::text, 15, 1) <> '7') THEN
        RAISE EXCEPTION 'notification and delivery ids must be UUIDv7 to be partitioned by day';
    END IF;

    -- Foreign keys that touch the three tables. Between them they are replaced (attempt →
    -- delivery per day; delivery → notification none: a delivery made a moment after
    -- midnight lies one day after its notification, and retention keeps a day while a
    -- delivery of its notifications is not final). Any other is recreated as it was.
    FOR r IN
        SELECT c.conname, c.conrelid::regclass::text AS tab, c.confrelid::regclass::text AS reftab,
               pg_get_constraintdef(c.oid) AS def
          FROM pg_constraint c
         WHERE c.contype = 'f'
           AND (c.conrelid::regclass::text IN ('notification', 'delivery', 'delivery_attempt')
                OR c.confrelid::regclass::text IN ('notification', 'delivery', 'delivery_attempt'))
    LOOP
        IF NOT (r.tab IN ('notification', 'delivery', 'delivery_attempt')
                AND r.reftab IN ('notification', 'delivery', 'delivery_attempt')) THEN
            fks := fks || format('ALTER TABLE %s ADD CONSTRAINT %I %s', r.tab, r.conname, r.def);
        END IF;
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.tab, r.conname);
    END LOOP;

    FOREACH tbl IN ARRAY ARRAY['notification', 'delivery', 'delivery_attempt'] LOOP
        key := CASE tbl WHEN 'delivery_attempt' THEN 'delivery_id' ELSE 'id' END;

        -- Indexes and the constraints they back. A unique one without the partition key
        -- cannot exist on the partitioned table: it becomes a plain index, except the
        -- idempotency key's, which idempotency_key replaces.
        FOR r IN
            SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def, c.oid AS con, c.conname,
                   c.contype, i.indisunique,
                   EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attname = key
                                                          AND a.attnum = ANY (i.indkey)) AS has_key,
                   (SELECT array_agg(a.attname ORDER BY a.attname) FROM pg_attribute a
                     WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)) AS cols
              FROM pg_index i
              LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid
             WHERE i.indrelid = tbl::regclass
        LOOP
            IF tbl = 'notification' AND r.cols = ARRAY['client_id', 'idempotency_key']::name[] AND NOT r.has_key THEN
                CONTINUE;
            ELSIF r.con IS NOT NULL AND r.has_key THEN
                idx := idx || format('ALTER TABLE %I ADD CONSTRAINT %I %s', tbl, r.conname, pg_get_constraintdef(r.con));
            ELSIF r.indisunique AND NOT r.has_key THEN
                RAISE NOTICE 'unique index % of % does not contain the partition key: it becomes a plain index', r.name, tbl;
                idx := idx || regexp_replace(r.def, '^CREATE UNIQUE INDEX', 'CREATE INDEX');
            ELSE
                idx := idx || r.def;
            END IF;
            EXECUTE format('ALTER INDEX %I RENAME TO %I', r.name, left(r.name, 50) || '_unpartitioned');
        END LOOP;

        FOR r IN SELECT pg_get_triggerdef(t.oid) AS def FROM pg_trigger t
                  WHERE t.tgrelid = tbl::regclass AND NOT t.tgisinternal LOOP
            trg := trg || r.def;
        END LOOP;

        FOR r IN SELECT p.pubname, pg_get_expr(pr.prqual, pr.prrelid) AS qual
                   FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
                  WHERE pr.prrelid = tbl::regclass LOOP
            pubs := pubs || format('ALTER PUBLICATION %I ADD TABLE %I%s', r.pubname, tbl,
                                   coalesce(' WHERE (' || r.qual || ')', ''));
            pubs := pubs || format('ALTER PUBLICATION %I SET (publish_via_partition_root = true)', r.pubname);
        END LOOP;

        EXECUTE format('ALTER TABLE %I RENAME TO %I', tbl, tbl || '_unpartitioned');
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING ALL EXCLUDING INDEXES) PARTITION BY RANGE (%I)',
                       tbl, tbl || '_unpartitioned', key);
    END LOOP;

    -- Partitions for every day that has rows, yesterday, today and a week ahead (the
    -- partition job keeps them ahead from then on), bare: indexes and keys are built after
    -- the copy, in bulk, which is faster than maintaining them row by row.
    FOR d IN
        SELECT herald_uuid_day(id) FROM notification_unpartitioned
        UNION SELECT herald_uuid_day(id) FROM delivery_unpartitioned
        UNION SELECT herald_uuid_day(delivery_id) FROM delivery_attempt_unpartitioned
        UNION SELECT (now() AT TIME ZONE 'UTC')::date + g FROM generate_series(-1, 7) AS g
        ORDER BY 1
    LOOP
        FOREACH tbl IN ARRAY ARRAY['notification', 'delivery', 'delivery_attempt'] LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                           tbl || '_' || to_char(d, 'YYYYMMDD'), tbl, herald_day_bound(d), herald_day_bound(d + 1));
        END LOOP;
    END LOOP;

    -- The copy: the new tables have the old ones' columns in the old order (LIKE), the
    -- trigger is created after the copy, so updated_at keeps its values.
    INSERT INTO notification SELECT * FROM notification_unpartitioned;
    INSERT INTO delivery SELECT * FROM delivery_unpartitioned;
    INSERT INTO delivery_attempt SELECT * FROM delivery_attempt_unpartitioned;
    INSERT INTO idempotency_key (client_id, idempotency_key, notification_id, request_hash, created_at)
    SELECT client_id, idempotency_key, id, request_hash, created_at FROM notification_unpartitioned;

    DROP TABLE delivery_attempt_unpartitioned, delivery_unpartitioned, notification_unpartitioned;

    -- Primary keys and indexes (built on every partition), then each day's attempt foreign
    -- key and index names (herald_create_partitions on existing partitions adds only those).
    FOREACH stmt IN ARRAY idx LOOP
        EXECUTE stmt;
    END LOOP;
    FOR r IN SELECT DISTINCT substring(c.relname FROM '[0-9]{8}$') AS s
               FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'delivery'::regclass LOOP
        PERFORM herald_create_partitions(to_date(r.s, 'YYYYMMDD'));
    END LOOP;

    FOREACH stmt IN ARRAY trg || fks || pubs LOOP
        EXECUTE stmt;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$ BEGIN
    RAISE EXCEPTION 'migration 00060 (daily partitions) cannot be reverted: restore a backup taken before it';
END $$;
-- +goose StatementEnd
