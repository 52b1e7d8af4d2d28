package ingest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"net/http"
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

const insertAPIClient = `
INSERT INTO api_client (id, name, key_prefix, key_hash) VALUES ($1, $2, $3, $4)`

// CreateAPIClient registers an API client named name and returns its id and its key. The
// key is shown only here: herald stores its hash.
func CreateAPIClient(ctx context.Context, pool *pgxpool.Pool, name string) (clientID, key string, err error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 || strings.ContainsRune(name, 0) {
		return "", "", fmt.Errorf("create api client: name must be 1-200 characters")
	}
	id, err := uuid.NewV7()
	if err != nil {
		return "", "", fmt.Errorf("create api client %q: %w", name, err)
	}
	key, err = newAPIKey()
	if err != nil {
		return "", "", fmt.Errorf("create api client %q: %w", name, err)
	}
	h := sha256.Sum256([]byte(key))
	if _, err := pool.Exec(ctx, insertAPIClient, id.String(), name, key[:keyDisplayPrefix], h[:]); err != nil {
		return "", "", fmt.Errorf("create api client %q: %w", name, err)
	}
	return id.String(), key, nil
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

const lookupAPIClient = `
SELECT id::text FROM api_client WHERE key_hash = $1 AND revoked_at IS NULL`

type clientIDKey struct{}

// clientFrom returns the authenticated client id that authenticate put in the context.
func clientFrom(ctx context.Context) string {
	id, _ := ctx.Value(clientIDKey{}).(string)
	return id
}

// authenticate resolves "Authorization: Bearer <key>" to an API client and answers 401 when
// the key is missing, unknown or revoked. The lookup is one index probe on the key's hash,
// cached for Config.AuthCacheTTL.
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := bearerKey(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
			writeProblem(w, newAPIError(http.StatusUnauthorized, codeUnauthorized, "a valid API key is required: Authorization: Bearer <key>"))
			return
		}
		h := sha256.Sum256([]byte(key))
		if id, ok := a.keys.get(h, time.Now()); ok {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientIDKey{}, id)))
			return
		}
		var id string
		err := a.pool.QueryRow(r.Context(), lookupAPIClient, h[:]).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
			writeProblem(w, newAPIError(http.StatusUnauthorized, codeUnauthorized, "the API key is unknown or revoked"))
			return
		}
		if err != nil {
			a.internalError(w, r, fmt.Errorf("look up api key: %w", err))
			return
		}
		a.keys.put(h, id, time.Now())
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientIDKey{}, id)))
	})
}

func bearerKey(h string) (string, bool) {
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
