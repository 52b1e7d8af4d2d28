package dispatch

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/stacktest"
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
	refusedBefore := signals(d).count(herald.PriorityHigh, signalRateRefused)

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
	require.Equal(t, refusedBefore, signals(d).count(herald.PriorityHigh, signalRateRefused), "a HIGH delivery was refused by the limiter")

	var lat []time.Duration
	for _, c := range s.Calls() {
		if at, ok := produced[c.Message.DeliveryID]; ok {
			lat = append(lat, c.At.Sub(at))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sig := signals(d)
	t.Logf("HIGH produce→call while LOW drains: p50 %v, max %v (n=%d); stale admissions dropped: LOW %d, HIGH %d; LOW deferred %d",
		lat[len(lat)/2], lat[len(lat)-1], len(lat), sig.count(herald.PriorityLow, signalStaleAdmission),
		sig.count(herald.PriorityHigh, signalStaleAdmission), sig.count(herald.PriorityLow, signalDeferred))
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
			t.Logf("deferred %d refused %d processed %d", signals(d).count(herald.PriorityHigh, signalDeferred),
				signals(d).count(herald.PriorityHigh, signalRateRefused), signals(d).count(herald.PriorityHigh, signalProcessed))
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
	require.GreaterOrEqual(t, signals(d).count(herald.PriorityHigh, signalDeferred), int64(3))
	require.LessOrEqual(t, maxInWindow(callTimes(s), time.Second, all), 1)
}

// With a limit of 1/s, LOW's share is 0.6 calls and NORMAL's 0.9: they may not take the only
// slot of a window whenever it is free, or a waiting HIGH delivery loses to them. Their share
// is kept over two windows instead: one call, only when no call at all went out in the last
// two. A saturating HIGH so gets every slot, and an otherwise idle provider still serves LOW.
func TestTinyLimitKeepsHighReserve(t *testing.T) {
	t.Parallel()
	rdb, prefix := stacktest.Redis(t)
	high := func(a admission) bool { return a.prio == herald.PriorityHigh }
	notHigh := func(a admission) bool { return a.prio != herald.PriorityHigh }

	l := newTestLimiter(t, rdb, prefix+"mixed:", 1, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	as := hammer(ctx, l, map[herald.Priority]int{herald.PriorityLow: 4, herald.PriorityNormal: 2, herald.PriorityHigh: 1}, nil)
	require.LessOrEqual(t, maxInWindow(as, time.Second, all), 1, "the limit in every 1 s window")
	nh := maxInWindow(as, 100*time.Hour, notHigh)
	// The first slot after the limiter's start-up may go to anyone (nothing was sent before
	// it); after that, HIGH always sent within the last two windows.
	require.LessOrEqual(t, nh, 1, "LOW/NORMAL took HIGH's slots: %v", as)
	require.GreaterOrEqual(t, maxInWindow(as, 100*time.Hour, high), 2, "HIGH got the slots")

	l = newTestLimiter(t, rdb, prefix+"low:", 1, 4)
	ctx, cancel = context.WithTimeout(context.Background(), 5500*time.Millisecond)
	defer cancel()
	as = hammer(ctx, l, map[herald.Priority]int{herald.PriorityLow: 4}, nil)
	require.LessOrEqual(t, maxInWindow(as, 2*time.Second, all), 1, "LOW: one call per two windows")
	require.GreaterOrEqual(t, len(as), 2, "LOW is not starved on an idle provider")
}

func TestShareWindow(t *testing.T) {
	for _, tc := range []struct {
		limit          int
		share          float64
		threshold, win int
	}{
		{50, 0.6, 30, 1}, {50, 1, 50, 1}, {2, 0.6, 1, 1}, {1, 1, 1, 1},
		{1, 0.6, 1, 2}, {1, 0.9, 1, 2}, {1, 0.5, 1, 2}, {1, 0.3, 1, 4}, {1, 0.1, 1, 10}, {3, 0.2, 1, 2},
	} {
		th, w := shareWindow(tc.limit, tc.share)
		require.Equal(t, [2]int{tc.threshold, tc.win}, [2]int{th, w}, "limit %d share %v", tc.limit, tc.share)
	}
}
