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

// TestClaimOfOneDayIsPlannedOnce: claims of deliveries of one day, one after another on one
// connection, run that day's prepared statement on its generic plan, every one, also once the
// day's partition has statistics (on which PostgreSQL, left to choose, plans each call anew); and that plan, forced generic, still holds the day's partition
// only (the ids' bounds are constants), of a delivery made 20 days ago as of one made today.
// A claim of ids of two days keeps the unbounded statement, planned for its values.
func TestClaimOfOneDayIsPlannedOnce(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	const claims = 10
	ids := deliverytest.Insert(t, pool, claims, deliverytest.Spec{})
	analyze(t, pool)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, id := range ids {
		claimed, err := delivery.ClaimBatch(ctx, conn, []delivery.Seen{{ID: id}})
		require.NoError(t, err)
		require.Contains(t, claimed, id)
	}
	generic, custom := deliverytest.PreparedPlans(t, conn, `statement LIKE '%SET status = ''SENDING''%'`)
	require.Equal(t, claims, generic+custom, "every claim ran the day's prepared statement")
	require.Equal(t, claims, generic, "every claim ran on the generic plan")

	client := deliverytest.Client(t, pool)
	day := partition.DayOf(deliverytest.OldDay(t, pool))
	_, old := deliverytest.InsertAt(t, pool, client, day.Time().Add(9*time.Hour), day.Time().Add(9*time.Hour))
	seen := []delivery.Seen{{ID: old}}
	sql, _ := delivery.ClaimStatementForTest(seen)
	scanned := deliverytest.LockedRelationsAfter(t, pool, []string{"SET LOCAL plan_cache_mode = force_generic_plan"},
		sql, delivery.ClaimBatchArgsForTest(seen)...)
	deliverytest.RequireOnlyPartitionsOf(t, scanned, day.Name("delivery"))

	twoDays, mode := delivery.ClaimStatementForTest([]delivery.Seen{{ID: old}, {ID: ids[0]}})
	require.Equal(t, delivery.ClaimBatchSQLForTest, twoDays)
	require.Equal(t, pgx.QueryExecModeExec, mode)
}

// TestOutcomeOfOneDayIsPlannedOnce: outcomes of deliveries of one day, written one after
// another on one connection, run that day's prepared statement (its plan PostgreSQL's choice:
// see RecordBatch for why it is not forced generic), which chooses the generic plan once its
// five custom plans are made (recordOneSQL), and the transaction of an outcome of a
// delivery made 20 days ago holds locks on that day's partitions only (and the day before's
// notifications), what the statement sets off (the foreign-key check, the event triggers)
// included. Outcomes of ids of two days keep the unbounded statement.
func TestOutcomeOfOneDayIsPlannedOnce(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	const outcomes = 10
	// The day's partition holds 20,000 more rows: on statistics of a few thousand, PostgreSQL
	// would choose the generic plan of the statement of arrays too (on 20,000 it planned
	// every outcome of that statement anew, as it did under load).
	ids := deliverytest.Insert(t, pool, outcomes, deliverytest.Spec{})
	deliverytest.Insert(t, pool, 20000, deliverytest.Spec{})
	analyze(t, pool)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for i, id := range ids {
		claimed, err := delivery.ClaimBatch(ctx, conn, []delivery.Seen{{ID: id}})
		require.NoError(t, err)
		o := delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:a", ProviderID: "m"}
		if i%2 == 1 { // a retry: the campaign check's notification bounds are in the statement too
			o = delivery.Outcome{Status: herald.StatusPending, AttemptClass: "TRANSIENT", Error: "busy", RetryIn: time.Minute}
		}
		recorded, err := delivery.RecordBatch(ctx, conn, []delivery.Recording{{ID: id, Attempt: 1,
			StartedAt: claimed[id].StartedAt, Outcome: o}})
		require.NoError(t, err)
		require.Contains(t, recorded, id)
	}
	generic, custom := deliverytest.PreparedPlans(t, conn, `statement LIKE '%INSERT INTO delivery_attempt%'`)
	require.Equal(t, outcomes, generic+custom, "every outcome ran the day's prepared statement")
	require.Equal(t, outcomes-5, generic, "PostgreSQL plans a prepared statement's first 5 runs for their values, and "+
		"an outcome's after them on the generic plan")

	client := deliverytest.Client(t, pool)
	day := partition.DayOf(deliverytest.OldDay(t, pool))
	_, old := deliverytest.InsertAt(t, pool, client, day.Time().Add(-time.Millisecond), day.Time())
	claimed, err := delivery.ClaimBatch(ctx, pool, []delivery.Seen{{ID: old}})
	require.NoError(t, err)
	rs := []delivery.Recording{{ID: old, Attempt: 1, StartedAt: claimed[old].StartedAt, Outcome: delivery.Outcome{
		Status: herald.StatusPending, AttemptClass: "TRANSIENT", Error: "busy", RetryIn: time.Minute}}}
	args, err := delivery.RecordBatchArgsForTest(rs)
	require.NoError(t, err)
	sql, args := delivery.RecordStatementForTest(args)
	scanned := deliverytest.LockedRelationsAfter(t, pool, nil, sql, args...)
	deliverytest.RequireOnlyPartitionsOf(t, scanned, day.Name("delivery"), day.Name("delivery_attempt"),
		day.Name("notification"), day.Add(-1).Name("notification"))

	rs = append(rs, delivery.Recording{ID: ids[0], Attempt: 2, StartedAt: time.Now(), Outcome: rs[0].Outcome})
	args, err = delivery.RecordBatchArgsForTest(rs)
	require.NoError(t, err)
	twoDays, _ := delivery.RecordStatementForTest(args)
	require.Equal(t, delivery.RecordBatchSQLForTest, twoDays)
}

// analyze gives the tables a dispatch statement reads their statistics, as autovacuum does to a
// day's partitions once they hold rows.
func analyze(t testing.TB, db delivery.DB) {
	t.Helper()
	_, err := db.Exec(context.Background(), "ANALYZE delivery, notification, delivery_attempt")
	require.NoError(t, err)
}

// TestDayBoundsArePartitionDays: the day statements bound ids to the range of the day's
// partitions, as partition.Day computes it, for ids on either side of a midnight.
func TestDayBoundsArePartitionDays(t *testing.T) {
	t.Parallel()
	midnight := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{midnight.Add(-time.Millisecond), midnight, midnight.Add(13 * time.Hour), midnight.Add(24*time.Hour - time.Millisecond)} {
		id, err := deliverytest.IDAt(at)
		require.NoError(t, err)
		lo, hi := delivery.DayBoundsForTest(id)
		day := partition.DayOfID(id)
		require.Equal(t, day.Lower(), lo, "lower bound of an id made at %s", at)
		require.Equal(t, day.Add(1).Lower(), hi, "upper bound of an id made at %s", at)
	}
}
