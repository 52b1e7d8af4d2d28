-- +goose Up

-- Campaigns (docs/api.md "Campaigns", docs/architecture.md "Campaign expansion"): one template sent to an audience, expanded by the
-- expander of any ingest process (internal/campaign/expander.go) in lots of 1,000 users, each lot
-- one transaction that writes the lot's notifications and deliveries and moves the cursor.
--
-- status: DRAFT (recipients may still be added) → EXPANDING (the expander works through the
-- audience) → ACTIVE (every user expanded) → DONE (every delivery final; set when observed);
-- CANCELLED from any of them. audience: the user ids of campaign_recipient, or a segment
-- (segment_tags, segment_locale) over user_contact. expanded_through is the cursor: the
-- highest user id of the audience whose lot committed. suppressed counts the requested
-- (user, channel) pairs that got no delivery, by reason ({"opted_out": 12, ...}).
CREATE TABLE campaign (
    id                uuid        PRIMARY KEY,
    client_id         uuid        NOT NULL REFERENCES api_client (id),
    idempotency_key   text        NOT NULL,
    request_hash      bytea       NOT NULL,
    response          jsonb       NOT NULL,
    name              text        NOT NULL,
    template          text        NOT NULL,
    category          text        NOT NULL,
    channels          text[]      NOT NULL,
    priority          text        NOT NULL CHECK (priority IN ('HIGH', 'NORMAL', 'LOW')),
    payload           jsonb       NOT NULL DEFAULT '{}',
    send_at           timestamptz,
    expires_at        timestamptz,
    audience_kind     text        NOT NULL CHECK (audience_kind IN ('users', 'segment')),
    segment_tags      text[],
    segment_locale    text,
    status            text        NOT NULL CHECK (status IN ('DRAFT', 'EXPANDING', 'ACTIVE', 'DONE', 'CANCELLED')),
    audience          bigint      NOT NULL DEFAULT 0,
    expanded          bigint      NOT NULL DEFAULT 0,
    expanded_through  bigint      NOT NULL DEFAULT 0,
    suppressed        jsonb       NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (client_id, idempotency_key)
);

-- The expander's scan for work: campaigns being expanded, the one a lot touched longest ago first.
CREATE INDEX campaign_expanding ON campaign (updated_at) WHERE status = 'EXPANDING';

-- The staged user ids of an audience given by list. The primary key makes a repeated id
-- count once and is the expander's cursor order.
CREATE TABLE campaign_recipient (
    campaign_id uuid   NOT NULL REFERENCES campaign (id) ON DELETE CASCADE,
    user_id     bigint NOT NULL CHECK (user_id > 0),
    PRIMARY KEY (campaign_id, user_id)
);

-- The campaign a notification was expanded from; NULL for a single POST.
ALTER TABLE notification ADD COLUMN campaign_id uuid;
CREATE INDEX notification_campaign ON notification (campaign_id) WHERE campaign_id IS NOT NULL;

-- Segment tags of a user profile; a segment matches users holding every tag it names.
ALTER TABLE user_contact ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
CREATE INDEX user_contact_tags ON user_contact USING gin (tags);

-- +goose Down
DROP INDEX user_contact_tags;
ALTER TABLE user_contact DROP COLUMN tags;
DROP INDEX notification_campaign;
ALTER TABLE notification DROP COLUMN campaign_id;
DROP TABLE campaign_recipient;
DROP TABLE campaign;
