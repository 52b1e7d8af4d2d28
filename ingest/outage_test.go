package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heraldhq/herald/deploy/local/privatestack"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/openapitest"
	"github.com/heraldhq/herald/internal/pgpool"
)

// While PostgreSQL is down, a POST is answered 503 unavailable with Retry-After (a problem
// document, not a 500), writes nothing, and logs no connection details; once PostgreSQL is
// back, the same request with the same Idempotency-Key is accepted, once.
func TestPostWhileDatabaseIsDownAnswersUnavailable(t *testing.T) {
	pg := privatestack.Start(t, privatestack.Postgres)
	ctx := context.Background()
	pool, err := pgpool.New(ctx, pg.URL(), 0)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = migrate.Up(ctx, pool)
	require.NoError(t, err)

	core, logs := observer.New(zap.DebugLevel)
	api, err := New(Config{}, pool, zap.New(core))
	require.NoError(t, err)
	srv := httptest.NewServer(openapitest.Handler(t, api.Handler()))
	t.Cleanup(srv.Close)
	e := &env{t: t, api: api, pool: pool, srv: srv}
	c, err := apikey.CreateAPIClient(ctx, pool, "test", apikey.AllScopes())
	require.NoError(t, err)
	e.clientID, e.key = c.ID, c.Key
	e.template("otp", "security", "SMS")
	e.user(1, map[string]any{"phone": "+15551230001"})
	body := map[string]any{"userId": 1, "template": "otp", "priority": "HIGH", "channels": []string{"SMS"}}
	require.Equal(t, http.StatusAccepted, e.post("before", body).status)

	pg.Down(t)
	// Both a key the API has cached and one it must look up meet the outage.
	other, err := e.send(http.MethodGet, "/api/notifications/0190d7a4-0000-7000-8000-000000000000", nil,
		map[string]string{"Authorization": "Bearer hk_" + fmt.Sprintf("%043d", 7)})
	require.NoError(t, err)
	requireUnavailable(t, other)
	for i := range 3 {
		res := e.post("during", body)
		requireUnavailable(t, res)
		require.Equal(t, "2", res.header.Get("Retry-After"), "attempt %d", i)
	}
	for _, entry := range logs.All() {
		for _, f := range entry.Context {
			require.NotContains(t, fmt.Sprint(f.Interface, f.String), pg.Addr, "log %q leaks the address", entry.Message)
			require.NotContains(t, fmt.Sprint(f.Interface, f.String), "postgres", "log %q leaks the user or database", entry.Message)
		}
	}
	require.Positive(t, logs.FilterMessage("database unavailable").Len())
	require.Zero(t, logs.FilterMessage("request failed").Len(), "an outage is not logged as a request failure")

	pg.Up(t)
	var res response
	require.Eventually(t, func() bool {
		res = e.post("during", body)
		return res.status != http.StatusServiceUnavailable
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	replay := e.post("during", body)
	require.Equal(t, http.StatusAccepted, replay.status)
	require.Equal(t, res.json(t)["id"], replay.json(t)["id"])
	notifications, _ := e.rows()
	require.Equal(t, 2, notifications, "the outage wrote nothing; the retry wrote once")
}

func requireUnavailable(t *testing.T, res response) {
	t.Helper()
	p := requireProblem(t, res, http.StatusServiceUnavailable, codeUnavailable)
	require.NotContains(t, p["detail"], "127.0.0.1")
	require.NotEmpty(t, res.header.Get("Retry-After"))
}

func TestDatabaseUnavailableClassifiesDriverErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"read-only standby", &pgconn.PgError{Code: "25006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"connection reset", fmt.Errorf("insert: %w", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}), true},
		{"unexpected EOF", fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), true},
		{"client went away", context.Canceled, false},
		{"request deadline", context.DeadlineExceeded, false},
		{"a bug", errors.New("render: nil map"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := databaseUnavailable(tc.err)
			require.Equal(t, tc.want, got)
		})
	}
}
