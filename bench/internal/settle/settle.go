// Package settle lets a benchmark measure each system it compares on a cluster as quiet as
// the first one had: the WAL and the dead rows that an earlier system left are dealt with
// before the next one starts, not during its measurement.
package settle

import (
	"context"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
)

// Cluster waits for the PostgreSQL cluster at dbURL to be as quiet as it was before the run
// that came first: a CHECKPOINT (so that no checkpoint of the WAL the run wrote falls into
// the next measurement), then until no autovacuum worker is at work on the run's dead rows,
// for at most limit. It returns how long it waited. A reference measured right after
// herald's drain otherwise shared the machine with the vacuum of herald's tables: pgbench of
// the accept SQL ranged over 2,355–3,599 tx/s in one hour.
func Cluster(tb testing.TB, dbURL string, limit time.Duration) time.Duration {
	tb.Helper()
	ctx := context.Background()
	pool, err := pgpool.New(ctx, dbURL, 0)
	heraldtest.Must(tb, err)
	defer pool.Close()
	start := time.Now()
	_, err = pool.Exec(ctx, `CHECKPOINT`)
	heraldtest.Must(tb, err)
	for time.Since(start) < limit {
		var workers int
		heraldtest.Must(tb, pool.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&workers))
		if workers == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start)
}
