package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// TestHandedHighIsSentWithoutKafka: a HIGH record handed to a running dispatcher (Hand) is
// sent, once, without being published; the relay's record of it that follows through Kafka
// makes no second call. A dispatcher not running takes nothing, nor does a lane whose every
// worker slot is busy.
func TestHandedHighIsSentWithoutKafka(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hold := make(chan struct{})
	holding := make(chan struct{}, 1)
	var held atomic.Value // the delivery whose call is held
	held.Store("")
	s := &MemorySender{Behave: func(ctx context.Context, m *senders.Message, _ int) (senders.Result, error) {
		if m.DeliveryID == held.Load() {
			holding <- struct{}{}
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		return senders.Result{}, nil
	}}
	cfg := e.config()
	lc := cfg.Lanes[herald.PriorityHigh]
	lc.Concurrency = 1
	cfg.Lanes[herald.PriorityHigh] = lc
	id := e.insert(fixture{Priority: herald.PriorityHigh})
	rec := e.records(id)[0]

	idle, err := New(cfg, e.pool, e.rdb, smsOnly(s), zap.NewNop())
	require.NoError(t, err)
	require.False(t, idle.Hand(rec), "a dispatcher that does not run takes nothing")

	d := e.start(cfg, nil, smsOnly(s))
	require.Eventually(t, func() bool { return d.Hand(rec) }, 10*time.Second, 10*time.Millisecond)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)
	require.NoError(t, e.producer.ProduceSync(context.Background(), rec).FirstErr()) // the relay's record
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)

	slow := e.insert(fixture{Priority: herald.PriorityHigh})
	held.Store(slow)
	slowRec := e.records(slow)[0]
	require.Eventually(t, func() bool { return d.Hand(slowRec) }, 10*time.Second, 10*time.Millisecond,
		"the slot frees once the relay's record is settled")
	<-holding // the lane's one slot is busy
	other := e.insert(fixture{Priority: herald.PriorityHigh})
	require.False(t, d.Hand(e.records(other)[0]), "no free worker slot: the caller publishes")
	close(hold)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, slow)

	require.Never(t, func() bool { return s.CallCount(id) > 1 }, time.Second, 20*time.Millisecond,
		"the relay's record of a handed delivery makes no second call")
	require.Equal(t, 1, s.CallCount(id))
}
