package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestBatchReadReadsOnlyItsRowsOnStaleStatistics: today's partitions, made days ahead by the
// partition job and never analyzed, take 20,000 deliveries and 15,000 attempts before
// autovacuum analyzes them (as at midnight under load). The batch read of 64 of them must still read about one notification and
// one attempt per delivery: no scan node on a notification or attempt partition may read
// (return or filter out) more rows than the batch has deliveries. Planned as joins from those
// statistics, the read hashed every notification of the day (20,000 rows read for 64).
func TestBatchReadReadsOnlyItsRowsOnStaleStatistics(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	day := partition.DayOf(now)
	for _, table := range []string{"notification", "delivery", "delivery_attempt"} {
		_, err := pool.Exec(ctx, `ALTER TABLE `+day.Name(table)+` SET (autovacuum_enabled = off)`)
		require.NoError(t, err)
	}
	deliverytest.Backlog(t, pool, 20_000, deliverytest.Spec{ClientID: client, UserID: 1, Template: "bench", Category: "bench",
		Recipient: `{"phone":"+15550000000"}`, Channel: herald.ChannelSMS, Priority: herald.PriorityNormal})
	_, err := pool.Exec(ctx, `
		WITH s AS (UPDATE delivery SET status = 'SENT', attempts = 1
		            WHERE id IN (SELECT id FROM delivery ORDER BY id LIMIT 15000) RETURNING id)
		INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome, provider) SELECT id, 1, now(), 'SENT', 'sms:bench' FROM s`)
	require.NoError(t, err)
	var ids []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(id::text) FROM (SELECT id FROM delivery ORDER BY id DESC OFFSET 4970 LIMIT 64) s`).Scan(&ids))

	rows, err := loadMany(ctx, pool, ids)
	require.NoError(t, err)
	require.Len(t, rows, len(ids))
	withAttempt := 0
	for _, r := range rows {
		if r.LastProvider != nil {
			withAttempt++
			require.Equal(t, "SENT", *r.LastOutcome)
		}
	}
	require.Equal(t, 34, withAttempt, "the 34 oldest of the 64 have an attempt")

	for name, read := range deliverytest.ScanReads(t, pool, loadStatement(day), loadDayArgs(ids)...) {
		if strings.HasPrefix(name, "notification_") || strings.HasPrefix(name, "delivery_attempt_") {
			require.LessOrEqual(t, read, float64(len(ids)), "rows read from %s by a batch read of %d deliveries", name, len(ids))
		}
	}
}
