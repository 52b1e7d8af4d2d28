package apikey

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Webhook signing secrets follow the Standard Webhooks specification: "whsec_" and the
// standard base64 of the HMAC-SHA256 key. herald draws 32 bytes (the specification allows
// 24 to 64). The secret is stored as is, since herald needs it to sign: it is a shared
// secret by nature (docs/security.md).
const (
	webhookSecretPrefix = "whsec_"
	webhookSecretBytes  = 32
)

// DefaultRotationWindow is how long the previous webhook secret keeps being used next to
// the new one after RotateWebhookSecret, unless ExpirePreviousWebhookSecret ends it sooner.
const DefaultRotationWindow = 24 * time.Hour

// NewWebhookSecret returns a fresh random signing secret.
func NewWebhookSecret() (string, error) {
	var b [webhookSecretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("read random webhook secret: %w", err)
	}
	return webhookSecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

const rotateWebhookSecret = `
UPDATE api_client SET webhook_secret_previous = webhook_secret, webhook_secret = $2,
       webhook_secret_previous_expires_at = now() + make_interval(secs => $3)
WHERE id = $1`

// RotateWebhookSecret gives the client a new signing secret and returns it. The previous
// one stays valid (webhooks carry a signature with each) for window, or until
// ExpirePreviousWebhookSecret. A secret that was itself still in its window is dropped.
func RotateWebhookSecret(ctx context.Context, pool *pgxpool.Pool, clientID string, window time.Duration) (string, error) {
	id, err := uuid.Parse(clientID)
	if err != nil {
		return "", fmt.Errorf("rotate webhook secret of %q: %w", clientID, ErrNotFound)
	}
	if window < 0 {
		return "", fmt.Errorf("rotate webhook secret of %s: negative window", id)
	}
	secret, err := NewWebhookSecret()
	if err != nil {
		return "", fmt.Errorf("rotate webhook secret of %s: %w", id, err)
	}
	tag, err := pool.Exec(ctx, rotateWebhookSecret, id.String(), secret, window.Seconds())
	if err != nil {
		return "", fmt.Errorf("rotate webhook secret of %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return "", fmt.Errorf("rotate webhook secret of %s: %w", id, ErrNotFound)
	}
	return secret, nil
}

const expirePreviousWebhookSecret = `
UPDATE api_client SET webhook_secret_previous = NULL, webhook_secret_previous_expires_at = NULL
WHERE id = $1`

// ExpirePreviousWebhookSecret ends a rotation window now: webhooks are signed with the
// current secret only (within the sender's cache TTL).
func ExpirePreviousWebhookSecret(ctx context.Context, pool *pgxpool.Pool, clientID string) error {
	id, err := uuid.Parse(clientID)
	if err != nil {
		return fmt.Errorf("expire previous webhook secret of %q: %w", clientID, ErrNotFound)
	}
	tag, err := pool.Exec(ctx, expirePreviousWebhookSecret, id.String())
	if err != nil {
		return fmt.Errorf("expire previous webhook secret of %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("expire previous webhook secret of %s: %w", id, ErrNotFound)
	}
	return nil
}

const lookupWebhookSecrets = `
SELECT webhook_secret,
       CASE WHEN webhook_secret_previous_expires_at > now() THEN webhook_secret_previous END
FROM api_client WHERE id = $1`

// WebhookSecrets reads API clients' current signing secrets from PostgreSQL, remembering
// each client's for a short TTL. It is what the webhook sender signs with.
type WebhookSecrets struct {
	pool *pgxpool.Pool
	ttl  time.Duration

	mu      sync.Mutex
	entries map[string]secretEntry
}

type secretEntry struct {
	secrets []string
	expires time.Time
}

// webhookSecretEntries bounds the cache; a full cache is dropped, as the auth cache is.
const webhookSecretEntries = 10_000

// NewWebhookSecrets returns the lookup. ttl bounds how long a rotation or an expiry takes to
// reach the sender (default 10s; negative disables the cache).
func NewWebhookSecrets(pool *pgxpool.Pool, ttl time.Duration) *WebhookSecrets {
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	return &WebhookSecrets{pool: pool, ttl: ttl, entries: map[string]secretEntry{}}
}

// WebhookSecrets returns the client's current secret, then its previous one while a rotation
// window is open. An unknown client has none: an empty list and no error.
func (s *WebhookSecrets) WebhookSecrets(ctx context.Context, clientID string) ([]string, error) {
	if _, err := uuid.Parse(clientID); err != nil {
		return nil, nil // no client has this id
	}
	now := time.Now()
	s.mu.Lock()
	e, ok := s.entries[clientID]
	s.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.secrets, nil
	}
	var current string
	var previous *string
	err := s.pool.QueryRow(ctx, lookupWebhookSecrets, clientID).Scan(&current, &previous)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("webhook secrets of client %s: %w", clientID, err)
	}
	secrets := []string{current}
	if previous != nil {
		secrets = append(secrets, *previous)
	}
	if s.ttl > 0 {
		s.mu.Lock()
		if len(s.entries) >= webhookSecretEntries {
			clear(s.entries)
		}
		s.entries[clientID] = secretEntry{secrets: secrets, expires: now.Add(s.ttl)}
		s.mu.Unlock()
	}
	return secrets, nil
}
