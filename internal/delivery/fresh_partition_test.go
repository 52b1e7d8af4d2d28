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
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestBatchesProbeByPrimaryKeyOnAPartitionThatGrewUnderTheirPlans: a day's partition starts
// empty, and a statement prepared while it is (the first batches after midnight, or on a
// new database) keeps its generic plan until the partition is first analyzed. Planned on an
// almost empty partition, the relay's mark read the partition whole on every run as it grew
// (a sequential scan filtered by the batch's array of ids): in the relay scenario, 2.1 million
// rows read by 267 scans before autovacuum first analyzed the day's partition. Here the mark,
// the claim and the outcome are planned on one row, on a connection with the relay's and
// dispatch's session settings (pgpool.ByKey); the partition grows by 20,000 rows (autovacuum
// kept off it, so that nothing replans); and the same three statements for ten rows on the
// same connection must read those rows only: a few probes each, not 20,000.
func TestBatchesProbeByPrimaryKeyOnAPartitionThatGrewUnderTheirPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := stacktest.Postgres(t)
	pool, err := pgpool.New(ctx, base.Config().ConnString(), 0, pgpool.ByKey())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	spec := deliverytest.Spec{ClientID: deliverytest.Client(t, pool)}
	first := deliverytest.One(t, pool, spec)
	var part string
	require.NoError(t, pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM delivery WHERE id = $1`, first).Scan(&part))
	_, err = pool.Exec(ctx, `ALTER TABLE `+part+` SET (autovacuum_enabled = false)`)
	require.NoError(t, err)

	// mark, claim and record the outcome of ids on conn, each in one statement.
	send := func(ctx context.Context, conn *pgx.Conn, ids []string) {
		vs := make([]delivery.Version, len(ids))
		seen := make([]delivery.Seen, len(ids))
		for i, id := range ids {
			vs[i], seen[i] = deliverytest.Version(t, pool, id), delivery.Seen{ID: id}
		}
		marked, err := delivery.MarkQueued(ctx, conn, vs)
		require.NoError(t, err)
		require.Len(t, marked, len(ids))
		claimed, err := delivery.ClaimBatch(ctx, conn, seen)
		require.NoError(t, err)
		require.Len(t, claimed, len(ids))
		rs := make([]delivery.Recording, 0, len(ids))
		for id, c := range claimed {
			rs = append(rs, delivery.Recording{ID: id, Attempt: c.Attempt, StartedAt: c.StartedAt,
				Outcome: delivery.Outcome{Status: herald.StatusSent, AttemptClass: herald.AttemptSent, Provider: "sim", ProviderID: "m-" + id}})
		}
		recorded, err := delivery.RecordBatch(ctx, conn, rs)
		require.NoError(t, err)
		require.Len(t, recorded, len(ids))
	}
	start := time.Now()
	reads := deliverytest.ExecutedScanReads(t, pool, func(ctx context.Context, conn *pgx.Conn) {
		send(ctx, conn, []string{first})
		deliverytest.Backlog(t, pool, 20_000, spec)
		ids := deliverytest.Insert(t, pool, 10, spec)
		var in int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+part+` WHERE id = ANY($1::uuid[])`, ids).Scan(&in))
		require.Equal(t, len(ids), in, "the ten rows are in %s too", part)
		send(ctx, conn, ids)
	})
	require.GreaterOrEqual(t, reads[part], 10.0, "rows of %s read: %v", part, reads)
	require.Less(t, reads[part], 200.0, "rows of %s read by the statements (%v): %v", part, time.Since(start), reads)
}
