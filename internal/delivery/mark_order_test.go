package delivery_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestConcurrentMarksOfTheSameRowsDoNotDeadlock: the relay's stream and its sweeper may mark
// the same rows at once, each batch in its own order. Beside 20,000 other PENDING rows (so
// that each mark probes its rows one by one, as on a day's partition), two marks of the same
// 2,000 versions, one given them in reverse, run together while a third transaction holds
// the middle row, five times. Neither waits for that lock: both return while it is held,
// without error, and each row but the held one is marked once; the held row is marked once
// its holder lets go. Marks that took each row's lock as it came waited for the holder, each
// holding the rows it had taken before, and deadlocked when it let go.
func TestConcurrentMarksOfTheSameRowsDoNotDeadlock(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	client := deliverytest.Client(t, pool)
	ctx := context.Background()
	deliverytest.Backlog(t, pool, 20_000, deliverytest.Spec{ClientID: client})
	for range 5 {
		ids := deliverytest.Insert(t, pool, 2000, deliverytest.Spec{ClientID: client, Channel: herald.ChannelSMS, Priority: herald.PriorityLow})
		vs := make([]delivery.Version, len(ids))
		for i, id := range ids {
			vs[i] = deliverytest.Version(t, pool, id)
		}
		reversed := slices.Clone(vs)
		slices.Reverse(reversed)
		held := vs[len(vs)/2]
		holder, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = holder.Rollback(ctx) })
		_, err = holder.Exec(ctx, `SELECT 1 FROM delivery WHERE id = $1::uuid FOR UPDATE`, held.ID)
		require.NoError(t, err)

		var wg sync.WaitGroup
		marked := make([]map[string]struct{}, 2)
		errs := make([]error, 2)
		for i, batch := range [][]delivery.Version{vs, reversed} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				marked[i], errs[i] = delivery.MarkQueued(ctx, pool, batch)
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a mark waited for the held row's lock")
		}
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Len(t, ids, len(marked[0])+len(marked[1])+1, "each row but the held one marked once")
		require.NotContains(t, marked[0], held.ID)
		require.NotContains(t, marked[1], held.ID)

		require.NoError(t, holder.Rollback(ctx))
		again, err := delivery.MarkQueued(ctx, pool, []delivery.Version{held})
		require.NoError(t, err)
		require.Contains(t, again, held.ID)
	}
}
