-- +goose Up

-- Re-drives (docs/api.md "Re-drive", docs/operations.md): an operator sends FAILED or EXPIRED
-- deliveries again. One row per POST /api/redrives, the audit of it: who (client_id), when
-- (created_at, finished_at), what (filter, include_permanent, expires_at, dry_run) and the
-- counts. The executor (internal/redrive) re-arms the matching deliveries in lots, each lot
-- one transaction that holds this row's lock (FOR NO KEY UPDATE SKIP LOCKED: one lot of a
-- re-drive at a time across processes) and moves the cursor, the highest delivery id the
-- committed lots have passed, so that a killed executor loses at most its lot in progress.
--
-- status: RUNNING (lots are being executed) → DONE (the cursor passed the last match). A dry
-- run is DONE when written. matched is the number of deliveries the filter matched when the
-- request was accepted; redriven counts the deliveries the lots re-armed; skipped counts the
-- matched deliveries left alone, by reason ({"permanent": 12, ...}).
CREATE TABLE redrive (
    id                uuid        PRIMARY KEY,
    client_id         uuid        NOT NULL REFERENCES api_client (id),
    idempotency_key   text        NOT NULL,
    request_hash      bytea       NOT NULL,
    response          jsonb       NOT NULL,
    filter            jsonb       NOT NULL,
    dry_run           boolean     NOT NULL,
    include_permanent boolean     NOT NULL,
    expires_at        timestamptz,
    status            text        NOT NULL CHECK (status IN ('RUNNING', 'DONE')),
    matched           bigint      NOT NULL,
    redriven          bigint      NOT NULL DEFAULT 0,
    skipped           jsonb       NOT NULL DEFAULT '{}',
    cursor_id         uuid,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    UNIQUE (client_id, idempotency_key)
);

-- The executor's scan for work: re-drives being executed, the one a lot touched longest ago first.
CREATE INDEX redrive_running ON redrive (updated_at) WHERE status = 'RUNNING';

-- The delivery's last re-drive and the attempt count it had then. Dispatch's give-up rule
-- counts the attempts after attempts_at_redrive (a fresh budget); attempt numbers go on
-- from where they were. Both have constant defaults and no check, so PostgreSQL adds them
-- without rewriting or scanning the partitions.
ALTER TABLE delivery ADD COLUMN redrive_id uuid;
ALTER TABLE delivery ADD COLUMN attempts_at_redrive integer NOT NULL DEFAULT 0;

-- The re-drive an attempt ran under, copied from the delivery row by every statement that
-- logs an attempt; NULL for attempts before any re-drive.
ALTER TABLE delivery_attempt ADD COLUMN redrive_id uuid;

-- The re-drive's scans (the count at the request and the lots, which walk the matches in id
-- order) read the FAILED and EXPIRED rows only, however many SENT rows the table holds. A
-- row enters it when it ends FAILED or EXPIRED, which is rare next to the writes on the hot
-- path, and leaves it when re-driven. Being partial on the status, it is built on each day's
-- partition and on the partitions created later.
CREATE INDEX delivery_redrivable ON delivery (id) WHERE status IN ('FAILED', 'EXPIRED');

-- +goose Down
DROP INDEX delivery_redrivable;
ALTER TABLE delivery_attempt DROP COLUMN redrive_id;
ALTER TABLE delivery DROP COLUMN attempts_at_redrive;
ALTER TABLE delivery DROP COLUMN redrive_id;
DROP TABLE redrive;
