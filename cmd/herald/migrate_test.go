package main

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/stacktest"
)

// TestOpenPoolSessionsHaveJITOff: every pool the subcommands open carries herald's session
// settings (internal/pgpool), and --database-max-conns bounds it.
func TestOpenPoolSessionsHaveJITOff(t *testing.T) {
	pool, err := openPool(t.Context(), commonConfig{DatabaseURL: stacktest.PostgresURL(t), MaxConns: 3}, "herald-migrate")
	require.NoError(t, err)
	defer pool.Close()
	var jit string
	require.NoError(t, pool.QueryRow(t.Context(), "SHOW jit").Scan(&jit))
	require.Equal(t, "off", jit)
	require.EqualValues(t, 3, pool.Config().MaxConns)
}

// TestRelayAndDispatchSessionsPlanWithoutSeqScan: herald serve's relay and dispatch pools
// plan without sequential scans (pgpool.ByKey), the API's pool keeps PostgreSQL's default,
// and a setting in --database-url wins over herald's.
func TestRelayAndDispatchSessionsPlanWithoutSeqScan(t *testing.T) {
	url := stacktest.PostgresURL(t)
	c := commonConfig{DatabaseURL: url, MaxConns: 1}
	settings := func(pool *pgxpool.Pool, err error) (seqscan, jit string) {
		t.Helper()
		require.NoError(t, err)
		defer pool.Close()
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT current_setting('enable_seqscan'), current_setting('jit')").Scan(&seqscan, &jit))
		return seqscan, jit
	}
	for name, open := range map[string]func(commonConfig) (*pgxpool.Pool, error){
		"relay":    func(c commonConfig) (*pgxpool.Pool, error) { return openRelayPool(t.Context(), c) },
		"dispatch": func(c commonConfig) (*pgxpool.Pool, error) { return openDispatchPool(t.Context(), c, 2) },
	} {
		seqscan, jit := settings(open(c))
		require.Equal(t, "off", seqscan, name)
		require.Equal(t, "off", jit, "%s: herald's own settings stay", name)
		withURL := c
		withURL.DatabaseURL = url + "&enable_seqscan=on"
		seqscan, _ = settings(open(withURL))
		require.Equal(t, "on", seqscan, "%s: the URL's setting wins", name)
	}
	seqscan, _ := settings(openPool(t.Context(), c, "herald"))
	require.Equal(t, "on", seqscan, "the API's pool")
}
