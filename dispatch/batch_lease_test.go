package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// TestBatchReleasesEachLeaseWhenItsAttemptEnds: two NORMAL records waiting in Kafka when the
// lane starts make one batch. While the provider call of one is held, the other's attempt
// ends SENT and its lease is gone from Redis at once, as on the per-record path — not kept
// until the batch's slowest call ends, when a record of that same attempt published again
// (a rate-limit deferral the sweeper republished) would find it taken and be dropped.
func TestBatchReleasesEachLeaseWhenItsAttemptEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	slow := e.insert(fixture{Priority: herald.PriorityNormal})
	fast := e.insert(fixture{Priority: herald.PriorityNormal})
	e.publish(slow, fast) // before the dispatcher starts: its first poll holds both

	hold := make(chan struct{})
	holding := make(chan struct{})
	s := &MemorySender{Behave: func(ctx context.Context, m *senders.Message, _ int) (senders.Result, error) {
		if m.DeliveryID == slow {
			close(holding)
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		return senders.Result{}, nil
	}}
	d := e.start(e.config(), nil, smsOnly(s))
	defer close(hold)

	<-holding
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, fast)
	slowKey, fastKey := d.leases.key(slow, 1), d.leases.key(fast, 1)
	require.EqualValues(t, 1, e.rdb.Exists(ctx, slowKey).Val(), "the held call's lease should still be taken")
	require.Eventually(t, func() bool { return e.rdb.Exists(ctx, fastKey).Val() == 0 },
		2*time.Second, 10*time.Millisecond, "the ended attempt's lease is still held while its batch's other call runs")
	st, _ := e.state(slow)
	require.Equal(t, herald.StatusSending, st)
}

// TestUsedUpLeasesAreDropped: the leases of attempts whose claim took the row are dropped
// together without their workers waiting (leases.drop), and none is left behind when the
// work stops: after a batch of sends, no lease key of this dispatcher remains in Redis, well
// before the leases' own expiry.
func TestUsedUpLeasesAreDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ids := e.insertN(40, fixture{Priority: herald.PriorityNormal})
	d := e.start(e.config(), nil, smsOnly(&MemorySender{}))
	e.publish(ids...)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, ids...)
	require.Greater(t, d.lanes[herald.PriorityNormal].leaseTTL(), 20*time.Second)
	require.Eventually(t, func() bool {
		keys, err := e.rdb.Keys(ctx, e.prefix+"lease:*").Result()
		return err == nil && len(keys) == 0
	}, 5*time.Second, 20*time.Millisecond, "leases of sent attempts left in Redis")
}
