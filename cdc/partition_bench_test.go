package cdc

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
)

// partitionSizeSQL is the size of every partition of the three tables, with their indexes
// and TOAST, plus idempotency_key; idempotency_key alone; the days whose partitions have rows.
const partitionSizeSQL = `
SELECT pg_total_relation_size('idempotency_key') + coalesce(sum(pg_total_relation_size(c.oid)), 0),
       pg_total_relation_size('idempotency_key'),
       count(DISTINCT substring(c.relname from '[0-9]{8}$')) FILTER (WHERE pg_relation_size(c.oid) > 0)
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent IN ('notification'::regclass, 'delivery'::regclass, 'delivery_attempt'::regclass)`

// BenchmarkRetentionSevenDays simulates HERALD_BENCH_DAYS (default 7) days of
// HERALD_BENCH_ROWS_PER_DAY (default 1,000,000) sent notifications a day, each with a delivery and an attempt, with a retention
// of 3 days and the relay streaming. Days are fabricated by the UUIDv7 time of their ids;
// the partition job runs on a simulated clock at the start of each day. It prints, per day,
// the size of the tables, the days with rows, what the pass dropped, and the relay's slot lag
// right after the drop and how long it took to reach the WAL position of the drop.
//
//	go test ./cdc/ -run '^$' -bench BenchmarkRetentionSevenDays -benchtime 1x
func BenchmarkRetentionSevenDays(b *testing.B) {
	perDay, days := 1_000_000, 7
	if s := os.Getenv("HERALD_BENCH_ROWS_PER_DAY"); s != "" {
		var err error
		perDay, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	if s := os.Getenv("HERALD_BENCH_DAYS"); s != "" {
		var err error
		days, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	ctx := context.Background()
	h := newHarness(b, nil)
	h.startRelay(h.cfg)
	var now atomic.Int64
	m, err := partition.New(partition.Config{Retention: 72 * time.Hour, Ahead: 2,
		Now: func() time.Time { return time.Unix(0, now.Load()) }}, h.pool, zaptest.NewLogger(b))
	require.NoError(b, err)

	// caughtUp waits until the slot has confirmed the current WAL position.
	caughtUp := func() time.Duration {
		target, start := h.currentWAL(), time.Now()
		eventually(b, 10*time.Minute, func() bool { return h.confirmedFlush() >= target }, "slot behind %d", target)
		return time.Since(start)
	}
	first := partition.DayOf(time.Now()).Add(-10 - days)
	fmt.Printf("%-4s %-10s %9s %8s %6s %-12s %14s %12s %12s\n", "day", "date", "size MB", "keys MB", "days", "dropped", "lag after MB", "catch-up", "insert")
	b.ResetTimer()
	for i := range days {
		day := first.Add(i)
		now.Store(day.Time().Add(time.Minute).UnixNano())
		res, err := m.Pass(ctx)
		require.NoError(b, err)
		require.Empty(b, res.Kept)
		var lag int64
		require.NoError(b, h.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots
			WHERE slot_name = $1`, h.cfg.Slot).Scan(&lag))
		catchUp := caughtUp()

		start := time.Now()
		require.NoError(b, deliverytest.FabricateDay(ctx, h.pool, h.clientID, day.Time(), perDay, true))
		insert := time.Since(start)
		caughtUp()
		var size, keys int64
		var days int
		require.NoError(b, h.pool.QueryRow(ctx, partitionSizeSQL).Scan(&size, &keys, &days))
		dropped := "-"
		if len(res.Dropped) > 0 {
			dropped = res.Dropped[0].String()[5:]
			for _, d := range res.Dropped[1:] {
				dropped += "," + d.String()[5:]
			}
		}
		fmt.Printf("%-4d %-10s %9d %8d %6d %-12s %14.2f %12v %12v\n", i+1, day, size>>20, keys>>20, days, dropped,
			float64(lag)/(1<<20), catchUp.Round(time.Millisecond), insert.Round(time.Second))
	}
	b.StopTimer()
}
