package delivery_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
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
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	day := partition.DayOf(now).Add(-20)
	for _, d := range []partition.Day{day.Add(-1), day} {
		_, err := pool.Exec(ctx, `SELECT herald_create_partitions($1::date)`, d.Time())
		require.NoError(t, err)
	}
	ids := []string{
		insertAt(t, pool, client, day.Time().Add(9*time.Hour), day.Time().Add(9*time.Hour)),
		insertAt(t, pool, client, day.Time().Add(-time.Millisecond), day.Time()),
	}

	seen := []delivery.Seen{{ID: ids[0]}, {ID: ids[1]}}
	scanned := deliverytest.PlannedRelations(t, pool, delivery.ClaimBatchSQLForTest, delivery.ClaimBatchArgsForTest(seen)...)
	requireOnlyPartitionsOf(t, scanned, day.Name("delivery"))
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
	requireOnlyPartitionsOf(t, scanned, day.Name("delivery"), day.Add(-1).Name("notification"), day.Name("notification"))
	require.Contains(t, scanned, day.Name("delivery"))
	recorded, err := delivery.RecordBatch(ctx, pool, rs)
	require.NoError(t, err)
	require.Len(t, recorded, 2)
	require.Equal(t, herald.StatusSent, read(t, pool, ids[0]).Status)
	require.Equal(t, herald.StatusPending, read(t, pool, ids[1]).Status)
}

var dailyPartition = regexp.MustCompile(`^(notification|delivery|delivery_attempt)_[0-9]{8}$`)

// requireOnlyPartitionsOf fails unless every daily partition in relations is one of allowed
// and the first of allowed is among them.
func requireOnlyPartitionsOf(t *testing.T, relations []string, allowed ...string) {
	t.Helper()
	require.Contains(t, relations, allowed[0], "the statement read none of its rows' partitions")
	for _, r := range relations {
		if dailyPartition.MatchString(r) {
			require.Contains(t, allowed, r, "a partition of another day in the plan: %v", relations)
		}
	}
}

// insertAt writes a PENDING, due SMS delivery with its id made at dAt, for a notification
// made at nAt, and returns the delivery's id.
func insertAt(t *testing.T, pool *pgxpool.Pool, client string, nAt, dAt time.Time) string {
	t.Helper()
	nid, err := deliverytest.IDAt(nAt)
	require.NoError(t, err)
	did, err := deliverytest.IDAt(dAt)
	require.NoError(t, err)
	ok, err := delivery.Insert(context.Background(), pool, delivery.Notification{ID: nid, ClientID: client,
		IdempotencyKey: uuid.NewString(), RequestHash: []byte{1}, UserID: 5, Template: "otp", Category: "security",
		Priority: herald.PriorityNormal, Response: []byte(`{}`),
		Deliveries: []delivery.New{{ID: did, Channel: herald.ChannelSMS}}})
	require.NoError(t, err)
	require.True(t, ok)
	return did.String()
}
