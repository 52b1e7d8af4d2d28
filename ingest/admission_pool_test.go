package ingest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald/internal/pgpool"
)

// With HighPool, a HIGH POST runs its accept on connections of its own: it is accepted while
// every connection of the API's pool is held (a burst of NORMAL accepts, a slow query). Were it
// to take one of the API's pool, it would wait for the held connections and the test fail at
// its 10 s bound.
func TestHighPostOnItsOwnConnections(t *testing.T) {
	var high *pgxpool.Pool
	e := newEnvWith(t, Config{}, zaptest.NewLogger(t), func(a *API) {
		var err error
		high, err = pgxpool.New(context.Background(), a.pool.Config().ConnString())
		require.NoError(t, err)
		t.Cleanup(high.Close)
		HighPool(high)(a)
	})
	e.template("otp", "security", "SMS")
	e.user(7, map[string]any{"phone": "+15551234567"})
	const otp = `{"userId":7,"template":"otp","channels":["SMS"],"priority":"HIGH"}`
	// The first request looks the API key up (through the API's pool) and caches it.
	res := e.post("k-1", otp)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)

	ctx := context.Background()
	for range e.pool.Config().MaxConns {
		c, err := e.pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(c.Release)
	}
	answered := make(chan response, 1)
	go func() {
		res, err := e.postAsync("k-2", otp)
		if err != nil {
			res.status = -1
		}
		answered <- res
	}()
	select {
	case res = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the HIGH POST waited for a connection of the API's pool")
	}
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
}

// On AcceptPool's connections, opened as herald serve opens them (pgpool.GenericPlans), a
// NORMAL POST's read and insert run on their generic plans from the first call: planned for
// each call's values, PostgreSQL's default for a prepared statement's first five calls, they
// cost the database about twice their CPU. The API's own pool, which served the key lookup,
// is left to PostgreSQL's choice.
func TestNormalPostsOnTheAcceptPoolsGenericPlans(t *testing.T) {
	var accept *pgxpool.Pool
	e := newEnvWith(t, Config{}, zaptest.NewLogger(t), func(a *API) {
		cfg, err := pgpool.NewConfig(a.pool.Config().ConnString(), 1, pgpool.ByKey(), pgpool.GenericPlans())
		require.NoError(t, err)
		accept, err = pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(accept.Close)
		AcceptPool(accept)(a)
	})
	e.template("welcome", "transactional", "SMS")
	e.user(7, map[string]any{"phone": "+15551234567"})
	const posts = 7
	for i := range posts {
		res := e.post(fmt.Sprintf("k-%d", i), `{"userId":7,"template":"welcome","channels":["SMS"]}`)
		require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	}

	ctx := context.Background()
	conn, err := accept.Acquire(ctx) // its only connection, the one that served the POSTs
	require.NoError(t, err)
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '%idempotency_key%' AND statement NOT LIKE '%pg_prepared_statements%'`)
	require.NoError(t, err)
	type plans struct {
		Statement       string
		Generic, Custom int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[plans])
	require.NoError(t, err)
	require.Len(t, got, 2, "the accept's read and insert, prepared on the accept pool's connection")
	for _, p := range got {
		require.Zero(t, p.Custom, "custom plans of %s", p.Statement)
		require.Equal(t, int64(posts), p.Generic, "generic plans of %s", p.Statement)
	}
}
