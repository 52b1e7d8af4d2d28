package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/pgpool"
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

// TestOpenPoolByKeySessionsHaveSeqScanOff: the relay's and dispatch's pools (openPool with
// pgpool.ByKey) plan without sequential scans; the other pools keep PostgreSQL's default.
func TestOpenPoolByKeySessionsHaveSeqScanOff(t *testing.T) {
	c := commonConfig{DatabaseURL: stacktest.PostgresURL(t), MaxConns: 1}
	for _, tc := range []struct {
		more []map[string]string
		want string
	}{{nil, "on"}, {[]map[string]string{pgpool.ByKey}, "off"}} {
		pool, err := openPool(t.Context(), c, "herald-relay", tc.more...)
		require.NoError(t, err)
		var seqscan, jit string
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT current_setting('enable_seqscan'), current_setting('jit')").Scan(&seqscan, &jit))
		pool.Close()
		require.Equal(t, tc.want, seqscan)
		require.Equal(t, "off", jit, "herald's own settings stay")
	}
}
