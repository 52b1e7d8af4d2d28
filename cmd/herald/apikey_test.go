package main

import (
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// runHerald runs the herald binary with args and returns its combined output and error.
func runHerald(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runHeraldEnv(t, nil, args...)
}

// runHeraldEnv is runHerald with env (KEY=VALUE) as the only HERALD_* variables.
func runHeraldEnv(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(heraldBin, args...)
	cmd.Env = nil
	for _, kv := range cmd.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	clientIDLine = regexp.MustCompile(`(?m)^client id:\s+(\S+)$`)
	scopesLine   = regexp.MustCompile(`(?m)^scopes:\s+(\S+)$`)
	secretLine   = regexp.MustCompile(`(?m)^webhook secret:\s+(whsec_[A-Za-z0-9+/]{43}=)$`)
)

// TestAPIKeyCLI: create (default and named scopes, unknown scope refused), list (never the
// key nor the secret), revoke, rotate-webhook-secret and --expire-previous, on a real database.
func TestAPIKeyCLI(t *testing.T) {
	dsn := stacktest.PostgresURL(t)
	db := []string{"--database-url", dsn}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM api_client`).Scan(&n))
		return n
	}

	out, err := runHerald(t, append([]string{"apikey", "create", "--name", "sender"}, db...)...)
	require.NoError(t, err, out)
	require.Equal(t, "notifications:send,notifications:read", scopesLine.FindStringSubmatch(out)[1], out)
	senderKey := apiKeyLine.FindStringSubmatch(out)[1]
	senderSecret := secretLine.FindStringSubmatch(out)
	require.NotNil(t, senderSecret, out)
	senderID := clientIDLine.FindStringSubmatch(out)[1]

	out, err = runHerald(t, append([]string{"apikey", "create", "--name", "directory", "--scopes", "users:write, users:read"}, db...)...)
	require.NoError(t, err, out)
	require.Equal(t, "users:read,users:write", scopesLine.FindStringSubmatch(out)[1], out)

	for _, bad := range []string{"users:wrte", "notifications:send,admin", ""} {
		out, err = runHerald(t, append([]string{"apikey", "create", "--name", "typo", "--scopes", bad}, db...)...)
		require.Error(t, err, out)
		require.Contains(t, out, "--scopes", out)
		require.Contains(t, out, "known: notifications:send,", "the error lists the valid scopes: %s", out)
	}
	require.Equal(t, 2, count(), "a refused create writes nothing")

	out, err = runHerald(t, append([]string{"apikey", "revoke", senderID}, db...)...)
	require.NoError(t, err, out)
	out, err = runHerald(t, append([]string{"apikey", "list"}, db...)...)
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^ID\s+NAME\s+PREFIX\s+SCOPES\s+CREATED\s+REVOKED$`, lines[0])
	require.Regexp(t, `^`+senderID+`\s+sender\s+`+regexp.QuoteMeta(senderKey[:11])+`\s+notifications:send,notifications:read\s+\S+Z\s+\S+Z$`, lines[1])
	require.Regexp(t, `\s+directory\s+hk_\S+\s+users:read,users:write\s+\S+Z\s+-$`, lines[2])
	require.NotContains(t, out, senderKey)
	require.NotContains(t, out, senderKey[11:20])
	require.NotContains(t, out, "whsec_")

	out, err = runHerald(t, append([]string{"apikey", "rotate-webhook-secret", senderID, "--previous-valid-for", "1h"}, db...)...)
	require.NoError(t, err, out)
	rotated := secretLine.FindStringSubmatch(out)
	require.NotNil(t, rotated, out)
	require.NotEqual(t, senderSecret[1], rotated[1])
	var current, previous string
	var window float64
	require.NoError(t, pool.QueryRow(ctx, `SELECT webhook_secret, webhook_secret_previous,
		extract(epoch FROM webhook_secret_previous_expires_at - now()) FROM api_client WHERE id = $1`, senderID).Scan(&current, &previous, &window))
	require.Equal(t, rotated[1], current)
	require.Equal(t, senderSecret[1], previous)
	require.InDelta(t, 3600, window, 60)

	out, err = runHerald(t, append([]string{"apikey", "rotate-webhook-secret", senderID, "--expire-previous"}, db...)...)
	require.NoError(t, err, out)
	var prev *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT webhook_secret_previous FROM api_client WHERE id = $1`, senderID).Scan(&prev))
	require.Nil(t, prev)

	for _, args := range [][]string{
		{"apikey", "revoke", "01a22bef-0000-7000-8000-000000000000"},
		{"apikey", "rotate-webhook-secret", "not-a-uuid"},
		{"apikey", "revoke"},
		{"apikey", "frobnicate"},
	} {
		out, err = runHerald(t, append(args, db...)...)
		require.Error(t, err, "%v: %s", args, out)
	}
}

// TestScopedKeyOverHTTP: a key made by the CLI with users:read only reads users and is
// refused the rest with 403 insufficient_scope, through herald serve.
func TestScopedKeyOverHTTP(t *testing.T) {
	s := newStack(t)
	sm := startSim(t)
	addr := heraldtest.FreeAddr(t)
	s.serve(t, "serve", addr, sm)
	out, err := runHerald(t, "apikey", "create", "--name", "reader", "--scopes", "users:read", "--database-url", s.dsn)
	require.NoError(t, err, out)
	key := apiKeyLine.FindStringSubmatch(out)[1]
	base := "http://" + addr
	doJSON(t, http.MethodGet, base+"/api/users/7", key, "", nil, http.StatusOK, http.StatusNotFound)
	var p map[string]any
	doJSON(t, http.MethodPut, base+"/api/users/7", key, `{"phone":"+15551234567"}`, &p, http.StatusForbidden)
	require.Equal(t, "insufficient_scope", p["code"])
	require.Contains(t, p["detail"], "users:write")
}
