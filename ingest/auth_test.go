package ingest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald/internal/apikey"
)

func TestAuth(t *testing.T) {
	// Without the key cache a revocation takes effect at once.
	e := newEnvWith(t, Config{AuthCacheTTL: -1}, zaptest.NewLogger(t))
	e.template("otp", "security", "SMS")
	e.user(5, map[string]any{"phone": "+15551234567"})
	body := `{"userId":5,"template":"otp","channels":["SMS"]}`

	require.True(t, strings.HasPrefix(e.key, "hk_"))
	require.Len(t, e.key, 3+43)
	var prefix string
	var hashLen int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT key_prefix, length(key_hash) FROM api_client WHERE id = $1`, e.clientID).Scan(&prefix, &hashLen))
	require.Equal(t, e.key[:11], prefix)
	require.Equal(t, 32, hashLen, "only the SHA-256 is stored")

	wrong := "hk_" + strings.Repeat("A", 43)
	for name, auth := range map[string]string{
		"missing":      "",
		"wrong key":    "Bearer " + wrong,
		"not bearer":   "Basic " + e.key,
		"no prefix":    "Bearer " + e.key[3:],
		"empty bearer": "Bearer ",
	} {
		t.Run(name, func(t *testing.T) {
			res := e.do(http.MethodPost, "/api/notifications", body, map[string]string{"Authorization": auth, "Idempotency-Key": name})
			requireProblem(t, res, http.StatusUnauthorized, codeUnauthorized)
			require.NotEmpty(t, res.header.Get("WWW-Authenticate"))
			res = e.do(http.MethodGet, "/api/templates/otp", nil, map[string]string{"Authorization": auth})
			requireProblem(t, res, http.StatusUnauthorized, codeUnauthorized)
		})
	}
	n, _ := e.rows()
	require.Zero(t, n)

	// The key works until its client is revoked.
	res := e.post("before-revoke", body)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	require.NoError(t, apikey.RevokeAPIClient(context.Background(), e.pool, e.clientID))
	require.NoError(t, apikey.RevokeAPIClient(context.Background(), e.pool, e.clientID), "revoking twice is a no-op")
	res = e.post("after-revoke", body)
	requireProblem(t, res, http.StatusUnauthorized, codeUnauthorized)
	n, _ = e.rows()
	require.Equal(t, 1, n)

	err := apikey.RevokeAPIClient(context.Background(), e.pool, uuid.NewString())
	require.True(t, errors.Is(err, apikey.ErrNotFound), "%v", err)
	err = apikey.RevokeAPIClient(context.Background(), e.pool, "not-a-uuid")
	require.True(t, errors.Is(err, apikey.ErrNotFound), "%v", err)

	// Probes need no key.
	for _, path := range []string{"/healthz", "/readyz"} {
		res := e.do(http.MethodGet, path, nil, map[string]string{"Authorization": ""})
		require.Equal(t, http.StatusOK, res.status, "%s: %s", path, res.body)
	}
}

// TestAuthCacheRevocation: with the key cache, a revoked key stops working within the TTL.
func TestAuthCacheRevocation(t *testing.T) {
	e := newEnvWith(t, Config{AuthCacheTTL: 200 * time.Millisecond}, zaptest.NewLogger(t))
	e.template("otp", "security", "SMS")
	res := e.do(http.MethodGet, "/api/templates/otp", nil, nil)
	require.Equal(t, http.StatusOK, res.status)
	require.NoError(t, apikey.RevokeAPIClient(context.Background(), e.pool, e.clientID))
	require.Eventually(t, func() bool {
		return e.do(http.MethodGet, "/api/templates/otp", nil, nil).status == http.StatusUnauthorized
	}, 10*time.Second, 20*time.Millisecond)
}

func TestAuthCache(t *testing.T) {
	c := newAuthCache(time.Second, 2)
	now := time.Unix(1000, 0)
	k1, k2, k3 := [32]byte{1}, [32]byte{2}, [32]byte{3}
	_, ok := c.get(k1, now)
	require.False(t, ok)
	c.put(k1, principal{clientID: "client-1", scopes: []apikey.Scope{apikey.ScopeUsersRead}}, now)
	p, ok := c.get(k1, now.Add(999*time.Millisecond))
	require.True(t, ok)
	require.Equal(t, principal{clientID: "client-1", scopes: []apikey.Scope{apikey.ScopeUsersRead}}, p, "the cache carries the scopes")
	_, ok = c.get(k1, now.Add(time.Second))
	require.False(t, ok, "expired at the TTL")
	c.put(k1, principal{clientID: "client-1", scopes: []apikey.Scope{apikey.ScopeUsersRead}}, now)
	c.put(k2, principal{clientID: "client-2"}, now)
	c.put(k3, principal{clientID: "client-3"}, now) // over the bound: the cache starts over
	_, ok = c.get(k1, now)
	require.False(t, ok)
	_, ok = c.get(k3, now)
	require.True(t, ok)

	off := newAuthCache(-1, 2)
	off.put(k1, principal{clientID: "client-1"}, now)
	_, ok = off.get(k1, now)
	require.False(t, ok, "a negative TTL disables the cache")
}

func TestCreateAPIClientKeysDiffer(t *testing.T) {
	e := newEnv(t)
	c1, err := apikey.CreateAPIClient(context.Background(), e.pool, "a", apikey.DefaultScopes())
	require.NoError(t, err)
	c2, err := apikey.CreateAPIClient(context.Background(), e.pool, "a", apikey.DefaultScopes())
	require.NoError(t, err)
	require.NotEqual(t, c1.Key, c2.Key)
	require.NotEqual(t, c1.WebhookSecret, c2.WebhookSecret)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, c1.WebhookSecret, "32 bytes, standard base64")
	_, err = apikey.CreateAPIClient(context.Background(), e.pool, " ", apikey.DefaultScopes())
	require.Error(t, err)
	_, err = apikey.CreateAPIClient(context.Background(), e.pool, "none", nil)
	require.Error(t, err, "a key needs at least one scope")
	_, err = apikey.CreateAPIClient(context.Background(), e.pool, "typo", []apikey.Scope{"users:wrte"})
	require.ErrorIs(t, err, apikey.ErrUnknownScope)
}

// TestNotificationsAreScopedToTheirClient: one client cannot read another's notification;
// unknown and malformed ids read the same way.
func TestNotificationsAreScopedToTheirClient(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS")
	e.user(5, map[string]any{"phone": "+15551234567"})
	res := e.post("k", `{"userId":5,"template":"otp","channels":["SMS"]}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	id := res.json(t)["id"].(string)

	own := e.do(http.MethodGet, "/api/notifications/"+id, nil, nil)
	require.Equal(t, http.StatusOK, own.status, "%s", own.body)

	other, err := apikey.CreateAPIClient(context.Background(), e.pool, "other", apikey.DefaultScopes())
	require.NoError(t, err)
	res = e.do(http.MethodGet, "/api/notifications/"+id, nil, map[string]string{"Authorization": "Bearer " + other.Key})
	requireProblem(t, res, http.StatusNotFound, codeNotFound)

	for _, bad := range []string{uuid.NewString(), "not-a-uuid", "0"} {
		res := e.do(http.MethodGet, "/api/notifications/"+bad, nil, nil)
		requireProblem(t, res, http.StatusNotFound, codeNotFound)
	}
}

func TestRoutingErrors(t *testing.T) {
	e := newEnv(t)
	res := e.do(http.MethodDelete, "/api/notifications", nil, nil)
	requireProblem(t, res, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	res = e.do(http.MethodGet, "/api/nothing-here", nil, nil)
	requireProblem(t, res, http.StatusNotFound, codeNotFound)
	res = e.do(http.MethodPost, "/healthz", nil, nil)
	requireProblem(t, res, http.StatusMethodNotAllowed, codeMethodNotAllowed)
}
