package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestBatchClaimAndOutcomeReadEachRowOnce: the relay's QUEUED mark, a claim and an outcome of
// a batch of one day's deliveries, on their generic plans, read each delivery a bounded number
// of times, beside 20,000 other PENDING rows on a day partition never analyzed (what
// PostgreSQL knows of a young one). When the planner joined the deliveries, found by
// id = ANY($1) and estimated at one row, to the batch's values in a nested loop, it rescanned
// the values once per delivery: 64² rows for a batch of 64, the claim twice over. The mark,
// its values estimated at ten rows, hashed them and read every PENDING row to probe them.
func TestBatchClaimAndOutcomeReadEachRowOnce(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	client := deliverytest.Client(t, pool)
	const n = 64
	var now time.Time
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now))
	_, err := pool.Exec(context.Background(), `ALTER TABLE `+partition.DayOf(now).Name("delivery")+` SET (autovacuum_enabled = off)`)
	require.NoError(t, err)
	deliverytest.Backlog(t, pool, 20_000, deliverytest.Spec{ClientID: client})
	ids := deliverytest.Insert(t, pool, n, deliverytest.Spec{ClientID: client, Channel: herald.ChannelSMS, Priority: herald.PriorityNormal})
	seen := make([]delivery.Seen, n)
	vs := make([]delivery.Version, n)
	for i, id := range ids {
		seen[i] = delivery.Seen{ID: id}
		vs[i] = deliverytest.Version(t, pool, id)
	}
	for _, step := range []struct {
		name string
		run  func(ctx context.Context, conn *pgx.Conn) int
	}{
		{"mark", func(ctx context.Context, conn *pgx.Conn) int {
			marked, err := delivery.MarkQueued(ctx, conn, vs)
			require.NoError(t, err)
			return len(marked)
		}},
		{"claim", func(ctx context.Context, conn *pgx.Conn) int {
			claimed, err := delivery.ClaimBatch(ctx, conn, seen)
			require.NoError(t, err)
			return len(claimed)
		}},
		{"outcome", func(ctx context.Context, conn *pgx.Conn) int {
			rs := make([]delivery.Recording, n)
			for i, id := range ids {
				rs[i] = delivery.Recording{ID: id, Attempt: 1, StartedAt: time.Now(), Outcome: delivery.Outcome{
					Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:bench", ProviderID: "SM1"}}
			}
			recorded, err := delivery.RecordBatch(ctx, conn, rs)
			require.NoError(t, err)
			return len(recorded)
		}},
	} {
		var done int
		reads := deliverytest.ExecutedScanReads(t, pool, func(ctx context.Context, conn *pgx.Conn) { done = step.run(ctx, conn) })
		require.Equal(t, n, done, step.name)
		require.NotEmpty(t, reads, step.name)
		for scan, read := range reads {
			require.LessOrEqual(t, read, float64(2*n), "%s of %d deliveries: rows read by %s (all scans: %v)", step.name, n, scan, reads)
		}
	}
}

// TestMarkOfALotReadsEachRowOnce: the relay's QUEUED mark of rows that share one
// next_attempt_at (a campaign's lot, a backlog: one statement's now()) probes each by its id.
// With the version check written as plain equalities, the planner could probe through the
// partial index of PENDING rows by next_attempt_at whenever the statistics said that column
// was nearly unique (rows accepted one by one, analyzed before the lot came), and each probe
// then read every row of the lot: a mark of 1,000 rows of a 10,000-row lot took 200–340 ms,
// and the relay drained a backlog at 2,000 rows/s instead of 20,000.
func TestMarkOfALotReadsEachRowOnce(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	client := deliverytest.Client(t, pool)
	ctx := context.Background()
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	day := partition.DayOf(now).Name("delivery")
	_, err := pool.Exec(ctx, `ALTER TABLE `+day+` SET (autovacuum_enabled = off)`)
	require.NoError(t, err)
	// Statistics of a day whose rows were accepted one by one (every next_attempt_at its own)
	// and have moved on: few PENDING rows, so that the partial index of PENDING rows looks
	// cheap to walk.
	other := deliverytest.Backlog(t, pool, 20_000, deliverytest.Spec{ClientID: client})
	_, err = pool.Exec(ctx, `UPDATE delivery SET status = 'CANCELLED', next_attempt_at = next_attempt_at - random() * interval '1 day'
		WHERE next_attempt_at = (SELECT next_attempt_at FROM delivery WHERE id = $1)`, other)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE `+day)
	require.NoError(t, err)
	const lot, n = 5_000, 64
	first := deliverytest.Backlog(t, pool, lot, deliverytest.Spec{ClientID: client})
	first0 := deliverytest.Version(t, pool, first)
	rows, err := pool.Query(ctx, `SELECT id::text FROM delivery WHERE next_attempt_at = $1 AND status = 'PENDING' LIMIT $2`,
		first0.NextAttemptAt, n)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, ids, n)
	vs := make([]delivery.Version, n)
	for i, id := range ids {
		vs[i] = deliverytest.Version(t, pool, id)
	}
	var marked int
	reads := deliverytest.ExecutedScanReads(t, pool, func(ctx context.Context, conn *pgx.Conn) {
		m, err := delivery.MarkQueued(ctx, conn, vs)
		require.NoError(t, err)
		marked = len(m)
	})
	require.Equal(t, n, marked)
	for scan, read := range reads {
		require.LessOrEqual(t, read, float64(2*n), "mark of %d deliveries of a %d-row lot: rows read by %s (all scans: %v)", n, lot, scan, reads)
	}
}
