package delivery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestDueOrdersByPriority: with 100,000 LOW rows due, a HIGH retry that became due after all
// of them is in the sweeper's first batch, and the query walks the priority index instead of
// sorting the backlog.
func TestDueOrdersByPriority(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	// Not due when written (next_attempt_at > updated_at), as retries and scheduled sends
	// are: the sweeper's to publish once due.
	first := deliverytest.Backlog(t, pool, 100_000, deliverytest.Spec{ClientID: client, Priority: herald.PriorityLow, DueIn: time.Millisecond})
	high := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Priority: herald.PriorityHigh,
		Status: herald.StatusPending, Attempts: 2, DueIn: 50 * time.Millisecond})
	_, err := pool.Exec(ctx, `ANALYZE delivery`)
	require.NoError(t, err)

	var due []delivery.DueRow
	require.Eventually(t, func() bool {
		due, err = delivery.Due(ctx, pool, time.Hour, 1000)
		require.NoError(t, err)
		return len(due) == 1000 && due[0].ID == high
	}, 10*time.Second, 20*time.Millisecond, "the HIGH retry is not first in the first sweep batch")
	require.Equal(t, herald.PriorityHigh, due[0].Priority)
	require.True(t, due[0].BecameDue)
	for _, r := range due[1:] {
		require.Equal(t, herald.PriorityLow, r.Priority)
	}

	rows, err := pool.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) `+delivery.DueSQLForTest, 3600.0, 1000)
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	t.Log("\n" + strings.Join(plan, "\n"))
	require.Contains(t, strings.Join(plan, "\n"), "delivery_pending_by_priority")
	// delivery is partitioned by day: the partition of the backlog is read by its index;
	// empty partitions may be read by a Seq Scan of nothing.
	require.NotContains(t, strings.Join(plan, "\n"), "Seq Scan on "+partition.DayOfID(uuid.MustParse(first)).Name("delivery")+" ")
}

// TestExpireDueEndsPendingRowsPastTheirExpiry: PENDING rows past expires_at end EXPIRED with
// an EXPIRED attempt row, however far away their next_attempt_at; rows not expired, and rows
// a worker holds, are left alone; the batch size bounds one call.
func TestExpireDueEndsPendingRowsPastTheirExpiry(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	expired := deliverytest.Insert(t, pool, 3, deliverytest.Spec{ClientID: client, DueIn: time.Hour, ExpiresIn: -time.Second})
	retried := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusPending, Attempts: 2,
		DueIn: time.Hour, ExpiresIn: -time.Second})
	inFlight := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusSending, Attempts: 1, ExpiresIn: -time.Second})
	fresh := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, DueIn: time.Hour, ExpiresIn: time.Hour})

	n, err := delivery.ExpireDue(ctx, pool, 2)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "one call expires at most its batch")
	n, err = delivery.ExpireDue(ctx, pool, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	for _, id := range expired {
		require.Equal(t, state{Status: herald.StatusExpired, Attempts: 1, Logged: 1}, read(t, pool, id))
	}
	require.Equal(t, state{Status: herald.StatusExpired, Attempts: 3, Logged: 1}, read(t, pool, retried))
	require.Equal(t, state{Status: herald.StatusSending, Attempts: 1}, read(t, pool, inFlight))
	require.Equal(t, state{Status: herald.StatusPending}, read(t, pool, fresh))
	var outcome string
	require.NoError(t, pool.QueryRow(ctx, `SELECT outcome FROM delivery_attempt WHERE delivery_id = $1 AND attempt = 3`, retried).Scan(&outcome))
	require.Equal(t, "EXPIRED", outcome)
}
