-- +goose Up

-- The event of a send (SENDING → SENT) is written by the statement that records the send
-- (internal/delivery's outcome statement), one INSERT for every send of a batch, rather than by
-- the status trigger at commit, one INSERT routed into the partitioned outbox per event
-- (docs/events.md, "Who writes an event"). The statement says so for its transaction with
-- herald.outcome_events = 'statement' (set_config, local to the transaction) before it
-- changes a row; the trigger's function then leaves the sends of that transaction to it. A
-- session that never says so (a binary from before this migration, psql) still gets every
-- event from the trigger, so the migration and the binaries may roll out in either order.
-- Only the function changes (migration 00110's, with the check added): replacing a function
-- takes no lock on delivery, where changing the trigger's WHEN would drop and create it on
-- every partition, under their ACCESS EXCLUSIVE locks, against the relay and dispatch.
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
    -- The send's event is the outcome statement's, which said so for its transaction.
    IF NEW.status = 'SENT' AND current_setting('herald.outcome_events', true) IS NOT DISTINCT FROM 'statement' THEN
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
