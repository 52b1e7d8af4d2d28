package benchproc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// A session that burns CPU and ends between two readings counts whole: its CPU is in the
// postmaster's reaped children's time by the second reading.
func TestPostgresCPUCountsASessionThatEnded(t *testing.T) {
	ctx := context.Background()
	url := stacktest.PostgresURL(t)
	pool, err := pgpool.New(ctx, url, 0)
	require.NoError(t, err)
	defer pool.Close()
	server, err := FindPostgres(ctx, pool)
	require.NoError(t, err)
	before, err := server.CPU()
	require.NoError(t, err)

	// A session of its own, its CPU read from /proc before it ends.
	burner, err := pgpool.New(ctx, url, 1)
	require.NoError(t, err)
	var pid int
	require.NoError(t, burner.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	kids, err := server.Children()
	require.NoError(t, err)
	require.True(t, kids[pid], "session %d is not among the server's processes %v", pid, kids)
	var n int64
	require.NoError(t, burner.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 5000000)`).Scan(&n))
	burnt, err := CPUOf(pid)
	require.NoError(t, err)
	require.Positive(t, burnt, "generate_series of 5 M rows took no CPU tick")
	burner.Close()
	require.Eventually(t, func() bool {
		kids, err := server.Children()
		return err == nil && !kids[pid]
	}, 10*time.Second, 10*time.Millisecond, "session %d did not end", pid)

	after, err := server.CPU()
	require.NoError(t, err)
	require.GreaterOrEqual(t, after-before, burnt)
}

func TestMachineCPUGrows(t *testing.T) {
	a, err := MachineCPU()
	require.NoError(t, err)
	require.Positive(t, a)
	spins := 0 // busy for 200 ms: this core's ticks go to user time
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
		spins++
	}
	require.Positive(t, spins)
	b, err := MachineCPU()
	require.NoError(t, err)
	require.Greater(t, b, a)
}

func TestStatCPUCountsAfterTheCommandName(t *testing.T) {
	// A HotSpot compiler thread: its name holds a space and the fields after it are counted
	// from the closing parenthesis. utime 1544, stime 12.
	line := []byte("2450 (C2 CompilerThre) S 2432 2432 2432 0 -1 4194624 95306 0 0 0 1544 12 0 0 0 -10 1 0 1915 0 0\n")
	got, err := StatCPU(line)
	require.NoError(t, err)
	require.Equal(t, 1556*time.Second/userHZ, got)
	_, err = StatCPU([]byte("2450 (C2 CompilerThre) S 2432"))
	require.Error(t, err, "a short line")
}
