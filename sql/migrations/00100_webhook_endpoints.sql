-- +goose Up

-- The webhooks:write scope (docs/security.md): it manages a client's webhook endpoints. A key
-- that held every scope keeps holding every scope.
ALTER TABLE api_client DROP CONSTRAINT api_client_scopes_known;
ALTER TABLE api_client ADD CONSTRAINT api_client_scopes_known CHECK (scopes <@ ARRAY[
    'notifications:send', 'notifications:read', 'users:read', 'users:write',
    'templates:write', 'campaigns:write', 'webhooks:write', 'operator']);
UPDATE api_client SET scopes = ARRAY[
    'notifications:send', 'notifications:read', 'users:read', 'users:write',
    'templates:write', 'campaigns:write', 'webhooks:write', 'operator']
WHERE scopes @> ARRAY[
    'notifications:send', 'notifications:read', 'users:read', 'users:write',
    'templates:write', 'campaigns:write', 'operator'];

-- A client's webhook endpoint (docs/webhook-endpoints.md): where the status events of its own
-- notifications go. event_types empty means every type. disabled_at is set when the
-- endpoint answered 410 Gone (POST .../enable clears it); failing_since is the first failed
-- attempt since the last success (the "endpoint failing" alert reads it).
CREATE TABLE webhook_endpoint (
    id              uuid        PRIMARY KEY,
    client_id       uuid        NOT NULL REFERENCES api_client (id),
    url             text        NOT NULL,
    description     text        NOT NULL DEFAULT '',
    event_types     text[]      NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    disabled_at     timestamptz,
    failing_since   timestamptz
);
CREATE INDEX webhook_endpoint_client ON webhook_endpoint (client_id);

-- One event for one endpoint: the durable record the events role writes before it commits
-- its Kafka offset, so that a killed worker loses nothing. body is the CloudEvents structured
-- JSON exactly as POSTed (the same bytes, and so the same signature input, on every retry).
-- locked_until is the claim of the worker sending it now; a row whose claim ran out is
-- taken over by any events worker.
CREATE TABLE webhook_message (
    endpoint_id     uuid        NOT NULL REFERENCES webhook_endpoint (id) ON DELETE CASCADE,
    event_id        uuid        NOT NULL,
    event_type      text        NOT NULL,
    occurred_at     timestamptz NOT NULL,
    body            bytea       NOT NULL,
    status          text        NOT NULL DEFAULT 'PENDING'
        CONSTRAINT webhook_message_status_known CHECK (status IN ('PENDING', 'DELIVERED', 'DROPPED')),
    attempts        int         NOT NULL DEFAULT 0,
    -- attempts when the message was last replayed: the retry schedule starts again from here.
    attempt_base    int         NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    locked_until    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (endpoint_id, event_id)
);
-- The sweeper's scan: due PENDING messages, oldest first.
CREATE INDEX webhook_message_due ON webhook_message (next_attempt_at) WHERE status = 'PENDING';

-- The attempts log of GET /api/webhook-endpoints/{id}/attempts: one row per POST.
CREATE TABLE webhook_attempt (
    endpoint_id     uuid        NOT NULL REFERENCES webhook_endpoint (id) ON DELETE CASCADE,
    event_id        uuid        NOT NULL,
    attempt         int         NOT NULL,
    attempted_at    timestamptz NOT NULL DEFAULT now(),
    status_code     int,
    result          text        NOT NULL
        CONSTRAINT webhook_attempt_result_known CHECK (result IN ('DELIVERED', 'RETRY', 'DROPPED', 'GONE')),
    error           text,
    duration_ms     double precision NOT NULL,
    PRIMARY KEY (endpoint_id, event_id, attempt)
);
CREATE INDEX webhook_attempt_recent ON webhook_attempt (endpoint_id, attempted_at DESC);

-- +goose Down
DROP TABLE webhook_attempt;
DROP TABLE webhook_message;
DROP TABLE webhook_endpoint;
UPDATE api_client SET scopes = array_remove(scopes, 'webhooks:write');
ALTER TABLE api_client DROP CONSTRAINT api_client_scopes_known;
ALTER TABLE api_client ADD CONSTRAINT api_client_scopes_known CHECK (scopes <@ ARRAY[
    'notifications:send', 'notifications:read', 'users:read', 'users:write',
    'templates:write', 'campaigns:write', 'operator']);
