package ingest

import (
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald/internal/openapitest"
)

func TestUserProfile(t *testing.T) {
	e := newEnv(t)
	requireProblem(t, e.do(http.MethodGet, "/api/users/11", nil, nil), http.StatusNotFound, codeNotFound)

	res := e.do(http.MethodPut, "/api/users/11", map[string]any{
		"email": "u11@example.com", "phone": "+4915112345678", "webhookUrl": "https://example.com/h",
		"locale": "de-de", "timeZone": "Europe/Berlin",
		"pushTokens": []map[string]any{{"token": "b-token", "platform": "APNS"}, {"token": "a-token", "platform": "FCM"}},
	}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	put := res.json(t)
	require.Equal(t, "de-DE", put["locale"], "locale canonicalized")
	got := e.do(http.MethodGet, "/api/users/11", nil, nil)
	require.Equal(t, http.StatusOK, got.status)
	require.JSONEq(t, string(res.body), string(got.body))
	require.Equal(t, []any{
		map[string]any{"token": "a-token", "platform": "FCM"},
		map[string]any{"token": "b-token", "platform": "APNS"},
	}, got.json(t)["pushTokens"])

	// PUT replaces the whole profile, tokens included; the time zone defaults to UTC.
	res = e.do(http.MethodPut, "/api/users/11", map[string]any{"phone": "+4915112345678"}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	got = e.do(http.MethodGet, "/api/users/11", nil, nil)
	p := got.json(t)
	require.Nil(t, p["email"])
	require.Equal(t, "UTC", p["timeZone"])
	require.Equal(t, []any{}, p["pushTokens"])
}

func TestPreferencesProfile(t *testing.T) {
	e := newEnv(t)
	requireProblem(t, e.do(http.MethodGet, "/api/users/12/preferences", nil, nil), http.StatusNotFound, codeNotFound)
	res := e.do(http.MethodPut, "/api/users/12/preferences", map[string]any{
		"optOuts":    []map[string]any{{"channel": "SMS", "category": "marketing"}, {"channel": "EMAIL"}},
		"quietHours": map[string]any{"start": "22:00", "end": "07:00"},
	}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	got := e.do(http.MethodGet, "/api/users/12/preferences", nil, nil)
	require.Equal(t, http.StatusOK, got.status)
	require.JSONEq(t, string(res.body), string(got.body))
	p := got.json(t)
	require.Equal(t, map[string]any{"start": "22:00", "end": "07:00"}, p["quietHours"])

	res = e.do(http.MethodPut, "/api/users/12/preferences", map[string]any{}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	p = e.do(http.MethodGet, "/api/users/12/preferences", nil, nil).json(t)
	require.Equal(t, []any{}, p["optOuts"])
	require.Nil(t, p["quietHours"])
}

func TestTemplateRegistry(t *testing.T) {
	e := newEnv(t)
	requireProblem(t, e.do(http.MethodGet, "/api/templates/welcome", nil, nil), http.StatusNotFound, codeNotFound)
	requireProblem(t, e.do(http.MethodGet, "/api/templates/bad%00name", nil, nil), http.StatusNotFound, codeNotFound)
	content := map[string]any{
		"EMAIL": map[string]any{"default": map[string]any{"subject": "Hi {{.name}}", "text": "Welcome"}},
		"SMS":   map[string]any{"default": map[string]any{"text": "Welcome {{.name}}"}, "de": map[string]any{"text": "Willkommen {{.name}}"}},
	}
	res := e.do(http.MethodPut, "/api/templates/welcome", map[string]any{
		"category": "onboarding", "channels": []string{"SMS", "EMAIL"}, "content": content,
	}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	got := e.do(http.MethodGet, "/api/templates/welcome", nil, nil)
	require.Equal(t, http.StatusOK, got.status)
	require.JSONEq(t, string(res.body), string(got.body))
	p := got.json(t)
	require.Equal(t, []any{"EMAIL", "SMS"}, p["channels"])
	require.Equal(t, content, p["content"])
}

func TestHealth(t *testing.T) {
	e := newEnv(t)
	res := e.do(http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, res.status)
	res = e.do(http.MethodGet, "/readyz", nil, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	// A database with a migration rolled back is not ready.
	api, err := New(Config{}, e.pool, nil)
	require.NoError(t, err)
	_, err = e.pool.Exec(t.Context(), `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`)
	require.NoError(t, err)
	rec := serve(openapitest.Handler(t, api.Handler()), http.MethodGet, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), codeNotReady)
	require.Contains(t, rec.Body.String(), "migrations is not ready")
}

// TestReadyzNamesOnlyTheDependency checks that /readyz, unauthenticated, answers which
// dependency is down and nothing of the driver's error: no host, user or database.
func TestReadyzNamesOnlyTheDependency(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), "postgres://secretuser:secretpass@127.0.0.1:1/secretdb?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	api, err := New(Config{}, pool, zaptest.NewLogger(t))
	require.NoError(t, err)
	rec := serve(openapitest.Handler(t, api.Handler()), http.MethodGet, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), codeNotReady)
	require.Contains(t, rec.Body.String(), "postgresql is not ready")
	for _, leak := range []string{"secretuser", "secretpass", "secretdb", "127.0.0.1", ":1", "dial", "connect"} {
		require.NotContains(t, rec.Body.String(), leak)
	}
}
