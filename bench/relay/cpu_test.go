package relay

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/bench/internal/benchproc"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestMeasureCPUAddsWhatEachPartUsed: the CPU a slice used is split into this process's and
// PostgreSQL's, within the machine's, and slices add up.
func TestMeasureCPUAddsWhatEachPartUsed(t *testing.T) {
	pool := newPool(t, stacktest.PostgresURL(t), 1)
	pg, err := benchproc.FindPostgres(context.Background(), pool)
	require.NoError(t, err)
	spin := func(d time.Duration) { // until this process has used d more
		start, err := benchproc.CPUOf(os.Getpid())
		require.NoError(t, err)
		for used := time.Duration(0); used < d; {
			now, err := benchproc.CPUOf(os.Getpid())
			require.NoError(t, err)
			used = now - start
		}
	}
	query := func() {
		var n int64
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM generate_series(1, 3000000)`).Scan(&n))
	}

	var u cpuUse
	u.measureCPU(t, pg, 0, func() { spin(200 * time.Millisecond) })
	require.GreaterOrEqual(t, u.self, 200*time.Millisecond, "the process's spin")
	first := u
	u.measureCPU(t, pg, 0, query)

	tick := 10 * time.Millisecond // USER_HZ
	require.Greater(t, u.took, first.took, "the second slice's time is added")
	require.Greater(t, u.postgres-first.postgres, 50*time.Millisecond, "PostgreSQL counted the query")
	require.GreaterOrEqual(t, u.machine+2*tick, u.self+u.postgres, "the parts are within the machine")
	require.False(t, u.brokerSeen, "no broker was measured")
}
