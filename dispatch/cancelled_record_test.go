package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
)

// A worker that reads the Kafka record of a delivery cancelled after it was published (QUEUED
// → CANCELLED, as a campaign cancel does) finds the row final and drops the record: no
// provider call, no attempt, the row stays CANCELLED.
func TestCancelledQueuedRecordIsNotSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{}
	d := e.start(e.config(), nil, smsOnly(s))
	cancelled := e.insert(fixture{})
	fresh := e.insert(fixture{})
	recs := e.records(cancelled, fresh) // made from the PENDING rows, as the relay does
	deliverytest.Place(t, e.pool, []string{cancelled}, deliverytest.Spec{Status: herald.StatusQueued})
	var nid string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT notification_id::text FROM delivery WHERE id = $1`, cancelled).Scan(&nid))
	n, err := delivery.Cancel(context.Background(), e.pool, []string{nid})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	require.NoError(t, e.producer.ProduceSync(context.Background(), recs...).FirstErr())
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, fresh)
	require.Eventually(t, func() bool { return signals(d).count(herald.PriorityHigh, signalProcessed) >= 2 },
		30*time.Second, 10*time.Millisecond)
	st, attempts := e.state(cancelled)
	require.Equal(t, herald.StatusCancelled, st)
	require.Zero(t, attempts)
	require.Zero(t, s.CallCount(cancelled))
	require.Empty(t, e.attempts(cancelled))
}
