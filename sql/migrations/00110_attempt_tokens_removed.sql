-- +goose Up

-- The push tokens an attempt found invalid (APNs 410 Unregistered, FCM UNREGISTERED), which
-- dispatch then removes from the user's profile (internal/pushtoken): the attempt log, the
-- timeline and the attempt's events say how many. A constant default: PostgreSQL adds the
-- column without rewriting the partitions.
ALTER TABLE delivery_attempt ADD COLUMN tokens_removed integer NOT NULL DEFAULT 0;

-- The events of migration 00090, with tokensRemoved in the data of a sent or failed delivery
-- and of a failed attempt whose provider reported tokens invalid (jsonb_strip_nulls drops it
-- when there were none).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION delivery_status_event() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- The last attempt is read for a FAILED delivery (its error) and for a SENT push delivery
    -- (its removed tokens) only: a SENT SMS, e-mail or webhook, the bulk of all events, costs
    -- no extra read.
    IF NEW.status = 'FAILED' OR (NEW.status = 'SENT' AND NEW.channel = 'PUSH') THEN
        SELECT * INTO a FROM delivery_attempt WHERE delivery_id = NEW.id AND attempt = NEW.attempts;
        extra := extra || jsonb_build_object('tokensRemoved', nullif(a.tokens_removed, 0));
    END IF;
    CASE NEW.status
    WHEN 'FAILED' THEN
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION delivery_attempt_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d delivery;
BEGIN
    IF NOT herald_event_enabled() THEN
        RETURN NULL;
    END IF;
    SELECT * INTO STRICT d FROM delivery WHERE id = NEW.delivery_id;
    PERFORM herald_write_event('herald.delivery.attempt_failed', d, jsonb_build_object(
        'attempt', NEW.attempt, 'provider', NEW.provider,
        'retryable', d.status IN ('PENDING', 'QUEUED'), 'tokensRemoved', nullif(NEW.tokens_removed, 0),
        'error', jsonb_strip_nulls(jsonb_build_object('class', lower(NEW.outcome),
                                                      'code', coalesce(NEW.provider_code, NEW.error)))));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose Down

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION delivery_status_event() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION delivery_attempt_event() RETURNS trigger LANGUAGE plpgsql AS $$
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

ALTER TABLE delivery_attempt DROP COLUMN tokens_removed;
