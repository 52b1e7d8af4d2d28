package apikey

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned for an API client (or other record) that does not exist.
var ErrNotFound = errors.New("not found")

// API keys are "hk_" followed by 256 random bits in base62 (43 characters, zero-padded), so
// that a double click selects the whole key. Only the SHA-256 of the full key is stored,
// plus a short prefix ("hk_" and 8 characters) to recognise a key in listings.
const (
	keyPrefix        = "hk_"
	keyBodyLen       = 43
	keyDisplayPrefix = len(keyPrefix) + 8
)

// NewAPIClient is what CreateAPIClient returns. Key and WebhookSecret are shown to the
// operator once; herald keeps only the key's hash (the secret it needs to sign webhooks).
type NewAPIClient struct {
	ID            string
	Key           string
	WebhookSecret string
	Scopes        []Scope
}

const insertAPIClient = `
INSERT INTO api_client (id, name, key_prefix, key_hash, scopes, webhook_secret)
VALUES ($1, $2, $3, $4, $5, $6)`

// CreateAPIClient registers an API client named name with the given scopes and returns its
// id, its key and its webhook signing secret.
func CreateAPIClient(ctx context.Context, pool *pgxpool.Pool, name string, scopes []Scope) (NewAPIClient, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 || strings.ContainsRune(name, 0) {
		return NewAPIClient{}, fmt.Errorf("create api client: name must be 1-200 characters")
	}
	scopes, err := ParseScopes(JoinScopes(scopes))
	if err != nil {
		return NewAPIClient{}, fmt.Errorf("create api client %q: %w", name, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return NewAPIClient{}, fmt.Errorf("create api client %q: %w", name, err)
	}
	key, err := newAPIKey()
	if err != nil {
		return NewAPIClient{}, fmt.Errorf("create api client %q: %w", name, err)
	}
	secret, err := NewWebhookSecret()
	if err != nil {
		return NewAPIClient{}, fmt.Errorf("create api client %q: %w", name, err)
	}
	h := sha256.Sum256([]byte(key))
	if _, err := pool.Exec(ctx, insertAPIClient, id.String(), name, key[:keyDisplayPrefix], h[:],
		scopeStrings(scopes), secret); err != nil {
		return NewAPIClient{}, fmt.Errorf("create api client %q: %w", name, err)
	}
	return NewAPIClient{ID: id.String(), Key: key, WebhookSecret: secret, Scopes: scopes}, nil
}

// APIClient is one row of ListAPIClients. It never holds the key or the webhook secret.
type APIClient struct {
	ID        string
	Name      string
	KeyPrefix string
	Scopes    []Scope
	CreatedAt time.Time
	RevokedAt *time.Time
}

const listAPIClients = `
SELECT id::text, name, key_prefix, scopes, created_at, revoked_at FROM api_client ORDER BY created_at, id`

// ListAPIClients returns every API client, revoked ones included, oldest first.
func ListAPIClients(ctx context.Context, pool *pgxpool.Pool) ([]APIClient, error) {
	rows, err := pool.Query(ctx, listAPIClients)
	if err != nil {
		return nil, fmt.Errorf("list api clients: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIClient, error) {
		var c APIClient
		var scopes []string
		err := r.Scan(&c.ID, &c.Name, &c.KeyPrefix, &scopes, &c.CreatedAt, &c.RevokedAt)
		c.Scopes = toScopes(scopes)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list api clients: %w", err)
	}
	return out, nil
}

const revokeAPIClient = `
UPDATE api_client SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`

const apiClientExists = `SELECT EXISTS (SELECT 1 FROM api_client WHERE id = $1)`

// RevokeAPIClient revokes every key of the client: later requests with it get 401. Revoking
// a revoked client is a no-op; an unknown client is ErrNotFound.
func RevokeAPIClient(ctx context.Context, pool *pgxpool.Pool, clientID string) error {
	id, err := uuid.Parse(clientID)
	if err != nil {
		return fmt.Errorf("revoke api client %q: %w", clientID, ErrNotFound)
	}
	tag, err := pool.Exec(ctx, revokeAPIClient, id.String())
	if err != nil {
		return fmt.Errorf("revoke api client %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var exists bool
	if err := pool.QueryRow(ctx, apiClientExists, id.String()).Scan(&exists); err != nil {
		return fmt.Errorf("revoke api client %s: %w", id, err)
	}
	if !exists {
		return fmt.Errorf("revoke api client %s: %w", id, ErrNotFound)
	}
	return nil
}

func newAPIKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("read random key: %w", err)
	}
	s := new(big.Int).SetBytes(b[:]).Text(62) // digits 0-9a-zA-Z
	return keyPrefix + strings.Repeat("0", keyBodyLen-len(s)) + s, nil
}

func scopeStrings(scopes []Scope) []string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}

func toScopes(s []string) []Scope {
	out := make([]Scope, len(s))
	for i, v := range s {
		out[i] = Scope(v)
	}
	return out
}
