package apikey

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrUnauthorized: the key is malformed, unknown or revoked, or the client is revoked.
var ErrUnauthorized = errors.New("unknown or revoked API key")

// Authenticate returns the client id and scopes of an API key (lookupAPIClient, the query
// the API's authorize runs), for callers outside the API that log in with a key (the
// operator console). A key that is malformed, unknown or revoked is ErrUnauthorized.
func Authenticate(ctx context.Context, pool *pgxpool.Pool, key string) (clientID string, scopes []Scope, err error) {
	key, ok := BearerKey("Bearer " + key)
	if !ok {
		return "", nil, ErrUnauthorized
	}
	return LookupHash(ctx, pool, sha256.Sum256([]byte(key)))
}

// lookupAPIClient finds a key by its SHA-256 (one probe of the unique key_hash index).
const lookupAPIClient = `
SELECT id::text, scopes FROM api_client WHERE key_hash = $1 AND revoked_at IS NULL`

// LookupHash returns the client id and scopes of the key whose SHA-256 is hash; an unknown
// or revoked key is ErrUnauthorized. The API's authorize runs it for every key it has not
// cached.
func LookupHash(ctx context.Context, db Querier, hash [32]byte) (clientID string, scopes []Scope, err error) {
	var names []string
	err = db.QueryRow(ctx, lookupAPIClient, hash[:]).Scan(&clientID, &names)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, ErrUnauthorized
	}
	if err != nil {
		return "", nil, fmt.Errorf("look up api key: %w", err)
	}
	return clientID, toScopes(names), nil
}

// Querier is what LookupHash reads with: a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func BearerKey(h string) (string, bool) {
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	if !strings.HasPrefix(key, keyPrefix) || len(key) > 200 {
		return "", false
	}
	return key, true
}

const lookupClientScopes = `SELECT scopes FROM api_client WHERE id = $1 AND revoked_at IS NULL`

// ClientScopes returns the scopes a client holds now; a revoked or unknown client is
// ErrUnauthorized. The console checks it on every request, so that revoking a key, or
// taking a scope away, ends its sessions at once.
func ClientScopes(ctx context.Context, pool *pgxpool.Pool, clientID string) ([]Scope, error) {
	if _, err := uuid.Parse(clientID); err != nil {
		return nil, ErrUnauthorized
	}
	var names []string
	err := pool.QueryRow(ctx, lookupClientScopes, clientID).Scan(&names)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("look up scopes of api client %s: %w", clientID, err)
	}
	return toScopes(names), nil
}

// HasScope reports whether a key holding have may do what needs want (ScopeOperator holds
// every scope).
func HasScope(have []Scope, want Scope) bool {
	return slices.Contains(have, want) || slices.Contains(have, ScopeOperator)
}
