package main

import (
	"testing"

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
