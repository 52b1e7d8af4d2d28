// Package apikey is the store of API clients: their keys (only the SHA-256 is kept), their
// scopes, and their webhook signing secrets. The HTTP API authenticates with it (ingest's
// authorize, through LookupHash), the operator console logs in with it (Authenticate,
// ClientScopes), `herald apikey` manages clients with it, and dispatch's webhook signer reads
// the secrets through WebhookSecrets. docs/security.md describes keys, scopes and secrets.
package apikey
