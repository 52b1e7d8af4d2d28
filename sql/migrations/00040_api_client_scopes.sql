-- +goose Up

-- Capabilities per API key (docs/security.md). A key that existed before scopes keeps
-- working exactly as before: it gets every scope. After that the default is no scope at
-- all, so that an insert that forgets them grants nothing (herald apikey create always names
-- them). The set of valid names is checked here as well as in Go.
ALTER TABLE api_client ADD COLUMN scopes text[] NOT NULL DEFAULT ARRAY[
    'notifications:send', 'notifications:read', 'users:read', 'users:write',
    'templates:write', 'campaigns:write', 'operator'];
ALTER TABLE api_client ALTER COLUMN scopes SET DEFAULT '{}';
ALTER TABLE api_client ADD CONSTRAINT api_client_scopes_known CHECK (scopes <@ ARRAY[
    'notifications:send', 'notifications:read', 'users:read', 'users:write',
    'templates:write', 'campaigns:write', 'operator']);

-- Each client's Standard Webhooks signing secret ("whsec_" + base64 of the key bytes), and
-- during a rotation the previous one, valid until webhook_secret_previous_expires_at. herald
-- needs the secret itself to sign, so it is stored as is: an HMAC key is a shared secret by
-- nature, and whoever can read this table can sign webhooks (docs/security.md).
--
-- The default gives every existing client (a volatile default is evaluated per row) and any
-- insert that names none a secret of its own. gen_random_uuid() draws from PostgreSQL's
-- strong random source (pg_strong_random); two v4 UUIDs make 32 bytes with 244 random bits,
-- without the pgcrypto extension. herald apikey create draws 32 bytes from crypto/rand.
ALTER TABLE api_client ADD COLUMN webhook_secret text NOT NULL DEFAULT 'whsec_' || encode(decode(
    replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''), 'hex'), 'base64');
ALTER TABLE api_client ADD COLUMN webhook_secret_previous text;
ALTER TABLE api_client ADD COLUMN webhook_secret_previous_expires_at timestamptz;

-- +goose Down
ALTER TABLE api_client DROP COLUMN webhook_secret_previous_expires_at;
ALTER TABLE api_client DROP COLUMN webhook_secret_previous;
ALTER TABLE api_client DROP COLUMN webhook_secret;
ALTER TABLE api_client DROP CONSTRAINT api_client_scopes_known;
ALTER TABLE api_client DROP COLUMN scopes;
