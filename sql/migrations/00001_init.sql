-- +goose Up

-- API clients authenticate with a bearer key. Only the SHA-256 of the key is stored: keys are
-- 256-bit random strings, so a fast hash is enough (no password stretching needed), and the
-- lookup is one index probe per request.
CREATE TABLE api_client (
    id          uuid        PRIMARY KEY,
    name        text        NOT NULL,
    key_prefix  text        NOT NULL,
    key_hash    bytea       NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- Templates: the registry that ingest validates against. content holds the per-channel,
-- per-locale message bodies; its shape belongs to the senders.
CREATE TABLE template (
    name        text        PRIMARY KEY,
    category    text        NOT NULL,
    channels    text[]      NOT NULL,
    content     jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE user_contact (
    user_id     bigint      PRIMARY KEY CHECK (user_id > 0),
    email       text,
    phone       text,
    webhook_url text,
    locale      text,
    time_zone   text        NOT NULL DEFAULT 'UTC',
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE push_token (
    user_id     bigint      NOT NULL REFERENCES user_contact (user_id) ON DELETE CASCADE,
    token       text        NOT NULL,
    platform    text        NOT NULL CHECK (platform IN ('FCM', 'APNS')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, token)
);

-- opt_outs: [{"channel": "SMS", "category": "marketing"}, {"channel": "EMAIL"}]; a missing
-- category means every category. Quiet hours are wall-clock times in user_contact.time_zone.
CREATE TABLE user_preference (
    user_id       bigint      PRIMARY KEY CHECK (user_id > 0),
    opt_outs      jsonb       NOT NULL DEFAULT '[]',
    quiet_start   time,
    quiet_end     time,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((quiet_start IS NULL) = (quiet_end IS NULL))
);

CREATE TABLE notification (
    id              uuid        PRIMARY KEY,
    client_id       uuid        NOT NULL REFERENCES api_client (id),
    idempotency_key text        NOT NULL,
    request_hash    bytea       NOT NULL,
    user_id         bigint      NOT NULL CHECK (user_id > 0),
    template        text        NOT NULL,
    category        text        NOT NULL,
    payload         jsonb       NOT NULL DEFAULT '{}',
    recipient       jsonb,
    priority        text        NOT NULL CHECK (priority IN ('HIGH', 'NORMAL', 'LOW')),
    traceparent     text,
    send_at         timestamptz,
    expires_at      timestamptz,
    response        jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (client_id, idempotency_key)
);

-- The delivery table is the source of truth of herald: one row per notification and channel.
-- updated_at is always the database clock (trigger below), so "due" compares two database
-- times: the relay publishes a row iff status = 'PENDING' AND next_attempt_at <= updated_at.
-- priority, expires_at and traceparent are copied from the notification so that the relay and
-- the sweeper can publish from this table alone.
CREATE TABLE delivery (
    id                  uuid        PRIMARY KEY,
    notification_id     uuid        NOT NULL REFERENCES notification (id) ON DELETE CASCADE,
    channel             text        NOT NULL CHECK (channel IN ('PUSH', 'EMAIL', 'SMS', 'WEBHOOK')),
    priority            text        NOT NULL CHECK (priority IN ('HIGH', 'NORMAL', 'LOW')),
    status              text        NOT NULL DEFAULT 'PENDING'
                                    CHECK (status IN ('PENDING', 'QUEUED', 'SENDING', 'SENT', 'FAILED', 'EXPIRED')),
    attempts            integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz,
    traceparent         text,
    last_error          text,
    provider            text,
    provider_message_id text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz,
    UNIQUE (notification_id, channel)
);

-- Only PENDING rows: the sweeper's scan for rows that became due stays small however large
-- the history grows.
CREATE INDEX delivery_pending_due ON delivery (next_attempt_at) WHERE status = 'PENDING';
-- QUEUED and SENDING rows: the reaper's scan for rows past their lease.
CREATE INDEX delivery_in_flight ON delivery (updated_at) WHERE status IN ('QUEUED', 'SENDING');

-- +goose StatementBegin
CREATE FUNCTION delivery_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER delivery_touch BEFORE INSERT OR UPDATE ON delivery
    FOR EACH ROW EXECUTE FUNCTION delivery_touch();

-- One row per provider call (or per decision that ended an attempt without one, such as
-- EXPIRED). A rate-limit deferral is not an attempt and writes no row.
CREATE TABLE delivery_attempt (
    delivery_id     uuid        NOT NULL REFERENCES delivery (id) ON DELETE CASCADE,
    attempt         integer     NOT NULL CHECK (attempt > 0),
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL DEFAULT now(),
    outcome         text        NOT NULL CHECK (outcome IN ('SENT', 'TRANSIENT', 'PERMANENT', 'AMBIGUOUS', 'EXPIRED')),
    error           text,
    provider        text,
    provider_code   text,
    PRIMARY KEY (delivery_id, attempt)
);

-- +goose Down
DROP TABLE delivery_attempt;
DROP TABLE delivery;
DROP FUNCTION delivery_touch();
DROP TABLE notification;
DROP TABLE user_preference;
DROP TABLE push_token;
DROP TABLE user_contact;
DROP TABLE template;
DROP TABLE api_client;
