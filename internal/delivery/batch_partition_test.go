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

// TestBatchStatementsHoldOnlyTheirDaysPartitions: a batch claim and a batch outcome write of
// deliveries made 20 days ago plan, lock and read only that day's partitions (and, for the
// notifications a retry's campaign check reads, the day before), not every day's, while
// they claim and record what they should. One delivery was made just after midnight for a
// notification of the day before, the case the notification bounds must still cover.
func TestBatchStatementsHoldOnlyTheirDaysPartitions(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	day := partition.DayOf(deliverytest.OldDay(t, pool))
	_, first := deliverytest.InsertAt(t, pool, client, day.Time().Add(9*time.Hour), day.Time().Add(9*time.Hour))
	_, second := deliverytest.InsertAt(t, pool, client, day.Time().Add(-time.Millisecond), day.Time())
	ids := []string{first, second}

	seen := []delivery.Seen{{ID: ids[0]}, {ID: ids[1]}}
	scanned := deliverytest.PlannedRelations(t, pool, delivery.ClaimBatchSQLForTest, delivery.ClaimBatchArgsForTest(seen)...)
	deliverytest.RequireOnlyPartitionsOf(t, scanned, day.Name("delivery"))
	// A claim of one, which waits for the row's lock instead of skipping it, is bounded the same way.
	scanned = deliverytest.PlannedRelations(t, pool, delivery.ClaimOneSQLForTest, delivery.ClaimBatchArgsForTest(seen[:1])...)
	deliverytest.RequireOnlyPartitionsOf(t, scanned, day.Name("delivery"))
	require.Contains(t, scanned, day.Name("delivery"))
	claimed, err := delivery.ClaimBatch(ctx, pool, seen)
	require.NoError(t, err)
	require.Len(t, claimed, 2)

	started := time.Now()
	rs := []delivery.Recording{
		{ID: ids[0], Attempt: 1, StartedAt: started, Outcome: delivery.Outcome{Status: herald.StatusSent,
			AttemptClass: "SENT", Provider: "sms:a", ProviderID: "m-1"}},
		{ID: ids[1], Attempt: 1, StartedAt: started, Outcome: delivery.Outcome{Status: herald.StatusPending,
			AttemptClass: "TRANSIENT", Error: "busy", RetryIn: time.Minute}},
	}
	args, err := delivery.RecordBatchArgsForTest(rs)
	require.NoError(t, err)
	scanned = deliverytest.PlannedRelations(t, pool, delivery.RecordBatchSQLForTest, args...)
	deliverytest.RequireOnlyPartitionsOf(t, scanned, day.Name("delivery"), day.Add(-1).Name("notification"), day.Name("notification"))
	require.Contains(t, scanned, day.Name("delivery"))
	recorded, err := delivery.RecordBatch(ctx, pool, rs)
	require.NoError(t, err)
	require.Len(t, recorded, 2)
	require.Equal(t, herald.StatusSent, read(t, pool, ids[0]).Status)
	require.Equal(t, herald.StatusPending, read(t, pool, ids[1]).Status)
}
