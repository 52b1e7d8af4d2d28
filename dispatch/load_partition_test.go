package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestBatchReadOfAnOldDayHoldsOnlyItsPartitions: the batch read of two deliveries made 20
// days ago, one of them just after midnight for a notification of the day before, returns
// both with their notifications, and its plan holds only the deliveries' and attempts' day
// partitions and the notifications' partitions of that day and the day before, not every
// day's, on the generic plan it runs on as on a custom one (the day's bounds are constants).
func TestBatchReadOfAnOldDayHoldsOnlyItsPartitions(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	day := partition.DayOf(deliverytest.OldDay(t, pool))
	notifications := map[string]string{}
	var ids []string
	for _, at := range [][2]time.Time{
		{day.Time().Add(9 * time.Hour), day.Time().Add(9 * time.Hour)},
		{day.Time().Add(-time.Millisecond), day.Time()},
	} {
		nid, did := deliverytest.InsertAt(t, pool, client, at[0], at[1])
		ids = append(ids, did)
		notifications[did] = nid
	}

	rows, err := loadMany(ctx, pool, ids)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, id := range ids {
		require.Equal(t, notifications[id], rows[id].NotificationID)
		require.Equal(t, client, rows[id].ClientID)
	}

	// A plan for the values (EXPLAIN's), and the generic plan (the locks it holds).
	for _, held := range [][]string{
		deliverytest.PlannedRelations(t, pool, loadStatement(day), loadDayArgs(ids)...),
		deliverytest.LockedRelationsAfter(t, pool, []string{"SET LOCAL plan_cache_mode = force_generic_plan"}, loadStatement(day), loadDayArgs(ids)...),
	} {
		deliverytest.RequireOnlyPartitionsOf(t, held, day.Name("delivery"), day.Name("delivery_attempt"),
			day.Name("notification"), day.Add(-1).Name("notification"))
	}
}

// TestReadOfOneDayIsPlannedOnce: reads of deliveries of one day, one after another on one
// connection, run that day's prepared statement on its generic plan, every one, also once the
// tables have statistics (on which PostgreSQL, left to choose, plans each read anew): a read
// plans nothing.
func TestReadOfOneDayIsPlannedOnce(t *testing.T) {
	t.Parallel()
	_, pool := oneConnPool(t)
	ctx := context.Background()
	const reads = 10
	ids := deliverytest.Insert(t, pool, reads, deliverytest.Spec{})
	analyzeReads(t, pool)
	for _, id := range ids {
		rows, err := loadMany(ctx, pool, []string{id})
		require.NoError(t, err)
		require.Contains(t, rows, id)
	}
	generic, custom := deliverytest.PreparedPlans(t, pool, `statement = $1`, loadStatement(partition.DayOfID(uuid.MustParse(ids[0]))))
	require.Equal(t, reads, generic+custom, "every read ran the day's prepared statement")
	require.Equal(t, reads, generic, "every read ran on the generic plan")
}

// oneConnPool is the test stack's database (shared) and a pool of one connection to it, whose
// prepared statements a test can count.
func oneConnPool(t *testing.T) (shared, pool *pgxpool.Pool) {
	t.Helper()
	shared = stacktest.Postgres(t)
	cfg := shared.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return shared, pool
}

// analyzeReads gives the tables a delivery's read touches their statistics, as autovacuum
// does to a day's partitions once they hold rows.
func analyzeReads(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "ANALYZE delivery, notification, delivery_attempt, user_contact, template")
	require.NoError(t, err)
}
