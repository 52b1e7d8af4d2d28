package dispatch

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// 500 LOW deliveries drain against a 50/s provider limit while HIGH deliveries trickle in:
// the provider never sees more than 50 calls in any one-second window (checked from every
// recorded call time), LOW never more than its 60 %, and no HIGH delivery is ever refused by
// the limiter, so none waits for a LOW one.
func TestRateLimitHoldsAndHighNeverWaitsForLow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.RateLimits = map[string]int{"sms:test": 50}
	// A busy test machine can stall Redis past the 250 ms default; degraded mode would then
	// (correctly) pause HIGH for a window, which is not what this test is about.
	cfg.RedisTimeout = 2 * time.Second
	lowLane := cfg.Lanes[herald.PriorityLow]
	lowLane.Concurrency = 4 // enough that the limit, not the lane, bounds LOW on a busy machine
	cfg.Lanes[herald.PriorityLow] = lowLane
	s := &MemorySender{ProviderName: "sms:test"}
	d := e.start(cfg, nil, smsOnly(s))
	e.sweep()
	// The first use of a provider's limiter waits out one window (see rateScript's guard).
	warm := e.insert(fixture{Priority: herald.PriorityHigh})
	e.publish(warm)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, warm)
	refusedBefore := d.lanes[herald.PriorityHigh].stats.rateRefused.Load()

	low := e.insertN(500, fixture{Priority: herald.PriorityLow})
	e.publish(low...)
	var high []string
	produced := map[string]time.Time{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for range 24 {
		<-tick.C
		id := e.insert(fixture{Priority: herald.PriorityHigh})
		produced[id] = time.Now()
		e.publish(id)
		high = append(high, id)
	}
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, high...)
	e.waitStatus(60*time.Second, []herald.Status{herald.StatusSent}, low...)

	calls := callTimes(s)
	require.Len(t, calls, 1+len(low)+len(high), "one call per delivery")
	lowOnly := func(a admission) bool { return a.prio == herald.PriorityLow }
	require.LessOrEqual(t, maxInWindow(calls, time.Second, all), 50, "provider limit in every 1 s window")
	require.LessOrEqual(t, maxInWindow(calls, time.Second, lowOnly), 30, "LOW share in every 1 s window")
	require.GreaterOrEqual(t, maxInWindow(calls, time.Second, lowOnly), 25, "LOW drained near its share: the limit was the bottleneck")
	require.Equal(t, refusedBefore, d.lanes[herald.PriorityHigh].stats.rateRefused.Load(), "a HIGH delivery was refused by the limiter")

	var lat []time.Duration
	for _, c := range s.Calls() {
		if at, ok := produced[c.Message.DeliveryID]; ok {
			lat = append(lat, c.At.Sub(at))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ls, hs := &d.lanes[herald.PriorityLow].stats, &d.lanes[herald.PriorityHigh].stats
	t.Logf("HIGH produce→call while LOW drains: p50 %v, max %v (n=%d); stale admissions dropped: LOW %d, HIGH %d; LOW deferred %d",
		lat[len(lat)/2], lat[len(lat)-1], len(lat), ls.stale.Load(), hs.stale.Load(), ls.deferred.Load())
}

// A rate-limited delivery is deferred with next_attempt_at and keeps its attempt count: the
// limiter refusing it six times must not fail it.
func TestRateLimitDeferralKeepsAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.RateLimits = map[string]int{"sms:test": 1}
	cfg.Lanes[herald.PriorityHigh] = LaneConfig{Topic: e.topics[herald.PriorityHigh],
		Group: cfg.Lanes[herald.PriorityHigh].Group, RateWait: -1} // defer at once
	cfg.RetryPolicies = map[herald.Channel]RetryPolicy{herald.ChannelSMS: {MaxAttempts: 1}}
	s := &MemorySender{ProviderName: "sms:test"}
	d := e.start(cfg, nil, smsOnly(s))
	e.sweep()

	ids := e.insertN(4, fixture{})
	e.publish(ids...)
	// Catch a deferred row: PENDING in the future, attempts untouched.
	require.Eventually(t, func() bool {
		var n int
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery
			WHERE id = ANY($1) AND status = 'PENDING' AND attempts = 0 AND next_attempt_at > now()`, ids).Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 5*time.Millisecond)
	t.Cleanup(func() {
		if t.Failed() {
			for _, id := range ids {
				st, n := e.state(id)
				t.Logf("%s %s %d calls=%d", id, st, n, s.CallCount(id))
			}
			t.Logf("deferred %d refused %d processed %d", d.lanes[herald.PriorityHigh].stats.deferred.Load(),
				d.lanes[herald.PriorityHigh].stats.rateRefused.Load(), d.lanes[herald.PriorityHigh].stats.processed.Load())
		}
	})
	e.waitStatus(20*time.Second, []herald.Status{herald.StatusSent}, ids...)

	for _, id := range ids {
		_, n := e.state(id)
		require.Equal(t, 1, n, "a deferral used up an attempt")
		as := e.attempts(id)
		require.Len(t, as, 1, "a deferral wrote an attempt row")
		require.Equal(t, "SENT", as[0].Outcome)
	}
	require.GreaterOrEqual(t, d.lanes[herald.PriorityHigh].stats.deferred.Load(), int64(3))
	require.LessOrEqual(t, maxInWindow(callTimes(s), time.Second, all), 1)
}
