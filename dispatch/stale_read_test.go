package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// A record can reach a worker before the transaction that wrote its row is visible (the
// commit record is in the WAL a moment before the commit shows in snapshots). The worker
// waits for the row instead of dropping the record: the delivery is sent without any sweeper
// or reaper, which this test does not run.
func TestRecordBeforeItsRowIsVisibleIsSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{}
	d := e.start(e.config(), nil, smsOnly(s))

	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below; a rollback after it is a no-op
	id := e.insertWith(tx, fixture{})
	recs := e.recordsWith(tx, id)
	require.NoError(t, e.producer.ProduceSync(ctx, recs...).FirstErr())

	// Commit only once a worker has read the row and missed it.
	require.Eventually(t, func() bool {
		return signals(d).count(herald.PriorityHigh, signalStaleRead) > 0
	}, 30*time.Second, time.Millisecond)
	require.NoError(t, tx.Commit(ctx))

	e.waitStatus(10*time.Second, []herald.Status{herald.StatusSent}, id)
	require.Equal(t, 1, s.CallCount(id))
}
