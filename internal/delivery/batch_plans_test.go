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
