package pgpool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// jitFunctions runs a trivial statement with JIT made as eager as it gets for this session
// (jit_above_cost 0) and returns how many functions PostgreSQL compiled for it.
func jitFunctions(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	ctx := context.Background()
	_, err := conn.Exec(ctx, "SET jit_above_cost = 0")
	require.NoError(t, err)
	var plan []byte
	require.NoError(t, conn.QueryRow(ctx,
		"EXPLAIN (ANALYZE, FORMAT JSON) SELECT sum(g) FROM generate_series(1, 10) g").Scan(&plan))
	var out []struct {
		JIT struct {
			Functions int `json:"Functions"`
		} `json:"JIT"`
	}
	require.NoError(t, json.Unmarshal(plan, &out))
	require.Len(t, out, 1)
	return out[0].JIT.Functions
}

func TestPoolSessionsNeverJITCompile(t *testing.T) {
	url := stacktest.PostgresURL(t)
	ctx := context.Background()

	// The control: a plain session on this server compiles the statement.
	plain, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer plain.Close(ctx)
	var available bool
	require.NoError(t, plain.QueryRow(ctx, "SELECT pg_jit_available()").Scan(&available))
	require.True(t, available, "the local stack's PostgreSQL has JIT (llvmjit); without it this test proves nothing")
	require.Positive(t, jitFunctions(t, plain), "a plain session did not JIT-compile with jit_above_cost 0")

	pool, err := pgpool.New(ctx, url, 2)
	require.NoError(t, err)
	defer pool.Close()
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	require.Zero(t, jitFunctions(t, c.Conn()), "a herald session JIT-compiled a statement")
}

func TestConnectionStringSettingWins(t *testing.T) {
	cfg, err := pgpool.ParseConfig("postgres://u@127.0.0.1:1/db?jit=on&application_name=x")
	require.NoError(t, err)
	require.Equal(t, "on", cfg.ConnConfig.RuntimeParams["jit"])
	require.Equal(t, "x", cfg.ConnConfig.RuntimeParams["application_name"])

	cfg, err = pgpool.ParseConfig("postgres://u@127.0.0.1:1/db")
	require.NoError(t, err)
	require.Equal(t, "off", cfg.ConnConfig.RuntimeParams["jit"])
}

// Warm leaves the pool holding that many open connections, idle, and never more than its
// MaxConns.
func TestWarmOpensTheConnections(t *testing.T) {
	ctx := context.Background()
	pool, err := pgpool.New(ctx, stacktest.PostgresURL(t), 4)
	require.NoError(t, err)
	defer pool.Close()
	require.Zero(t, pool.Stat().TotalConns(), "a new pool has dialled nothing")
	require.NoError(t, pgpool.Warm(ctx, pool, 3))
	require.EqualValues(t, 3, pool.Stat().TotalConns())
	require.EqualValues(t, 3, pool.Stat().IdleConns(), "released to the pool")
	require.NoError(t, pgpool.Warm(ctx, pool, 10))
	require.EqualValues(t, 4, pool.Stat().TotalConns(), "at most MaxConns")
}

// Named names a pool's sessions unless the connection string names them already.
func TestNamedKeepsTheURLsName(t *testing.T) {
	cfg, err := pgpool.ParseConfig("postgres://herald@db.internal/herald")
	require.NoError(t, err)
	pgpool.Named(cfg, "herald-dispatch")
	require.Equal(t, "herald-dispatch", cfg.ConnConfig.RuntimeParams["application_name"])

	cfg, err = pgpool.ParseConfig("postgres://herald@db.internal/herald?application_name=orders-herald")
	require.NoError(t, err)
	pgpool.Named(cfg, "herald-dispatch")
	require.Equal(t, "orders-herald", cfg.ConnConfig.RuntimeParams["application_name"])
}
