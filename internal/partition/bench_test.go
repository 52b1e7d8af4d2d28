package partition

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/stacktest"
)

// benchRows reads a row count from the environment (benchmarks scale down with it).
func benchRows(b *testing.B, name string, def int) int {
	b.Helper()
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(b, err, name)
		return n
	}
	return def
}

// BenchmarkMigrationToPartitions measures migration 00060 on a database with
// HERALD_BENCH_MIGRATION_ROWS (default 1,000,000) sent notifications, each with a delivery
// and an attempt, spread over the last 7 days. The migration holds ACCESS EXCLUSIVE locks on
// the three tables for its whole run, so its time is the time the API and the relay wait.
//
//	go test ./internal/partition/ -run '^$' -bench BenchmarkMigrationToPartitions -benchtime 1x
func BenchmarkMigrationToPartitions(b *testing.B) {
	rows := benchRows(b, "HERALD_BENCH_MIGRATION_ROWS", 1_000_000)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, stacktest.PostgresURLAt(b, stacktest.VersionBefore(b, 60)))
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	client := deliverytest.Client(b, pool)
	today := DayOf(time.Now())
	for i := range 7 {
		require.NoError(b, deliverytest.FabricateDay(ctx, pool, client, today.Add(-i).Time(), rows/7, false))
	}
	_, err = pool.Exec(ctx, `VACUUM ANALYZE notification, delivery, delivery_attempt`)
	require.NoError(b, err)
	var before int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT pg_total_relation_size('notification') + pg_total_relation_size('delivery')
		+ pg_total_relation_size('delivery_attempt')`).Scan(&before))

	b.ResetTimer()
	start := time.Now()
	_, err = migrate.Up(ctx, pool)
	require.NoError(b, err)
	took := time.Since(start)
	b.StopTimer()

	var after int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT pg_total_relation_size('idempotency_key') + coalesce(sum(pg_total_relation_size(c.oid)), 0)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent IN ('notification'::regclass, 'delivery'::regclass, 'delivery_attempt'::regclass)`).Scan(&after))
	b.ReportMetric(took.Seconds(), "s/migration")
	b.ReportMetric(float64(rows), "notifications")
	fmt.Printf("migration 00060: %d notifications + %d deliveries + %d attempts (7 days), %d MB before, %d MB after (with idempotency_key): %v under ACCESS EXCLUSIVE\n",
		rows/7*7, rows/7*7, rows/7*7, before>>20, after>>20, took.Round(time.Millisecond))
}
