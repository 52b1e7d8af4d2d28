package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestRecordBatchReadsOnlyItsRowsOnStaleStatistics: today's partition, never analyzed, holds
// 20,000 SENDING rows (as a drain's partition holds the index entries of every row once
// SENDING until vacuum). Recording the outcomes of 64 of them reads at most a few rows per
// outcome from the delivery partition. On a partial index that the outcome's UPDATE could use,
// PostgreSQL read all 20,000 entries in a bitmap and filtered them by id.
func TestRecordBatchReadsOnlyItsRowsOnStaleStatistics(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	day := partition.DayOf(now)
	_, err := pool.Exec(ctx, `ALTER TABLE `+day.Name("delivery")+` SET (autovacuum_enabled = off)`)
	require.NoError(t, err)
	deliverytest.Backlog(t, pool, 20_000, deliverytest.Spec{ClientID: client, Status: herald.StatusSending, Attempts: 1})
	var ids []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(id::text) FROM (SELECT id FROM delivery LIMIT 64) s`).Scan(&ids))
	rs := make([]delivery.Recording, len(ids))
	for i, id := range ids {
		rs[i] = delivery.Recording{ID: id, Attempt: 1, StartedAt: now,
			Outcome: delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:bench", ProviderID: "m"}}
	}
	args, err := delivery.RecordBatchArgsForTest(rs)
	require.NoError(t, err)
	reads := deliverytest.ScanReads(t, pool, delivery.RecordBatchSQLForTest, args...)
	require.LessOrEqual(t, reads[day.Name("delivery")], float64(2*len(ids)), "rows of %s read to record %d outcomes: %v", day.Name("delivery"), len(ids), reads)

	recorded, err := delivery.RecordBatch(ctx, pool, rs)
	require.NoError(t, err)
	require.Len(t, recorded, len(ids))
}
