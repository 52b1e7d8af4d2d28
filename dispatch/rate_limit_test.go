package dispatch

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

func newTestLimiter(t *testing.T, rdb *redis.Client, prefix string, limit, procs int) *rateLimiter {
	cfg := Config{RateLimits: map[string]int{"sms:test": limit}, DegradedProcesses: procs}.withDefaults()
	return &rateLimiter{
		rdb: rdb, prefix: prefix, limits: cfg.RateLimits, shares: cfg.RateShares,
		window: time.Second + cfg.RateWindowMargin, procs: procs, timeout: cfg.RedisTimeout,
		health: &redisHealth{retryEvery: 50 * time.Millisecond, log: zaptest.NewLogger(t)},
		member: stacktest.Name("m"), local: make(map[string][]time.Time),
	}
}

type admission struct {
	at       time.Time
	prio     herald.Priority
	degraded bool
}

// recorder collects admissions from hammering workers.
type recorder struct {
	mu  sync.Mutex
	out []admission
}

// count returns how many admissions since t satisfy keep.
func (r *recorder) count(since time.Time, keep func(admission) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.out {
		if !a.at.Before(since) && keep(a) {
			n++
		}
	}
	return n
}

// hammer calls allow from workers per priority until ctx ends, sleeping the advised wait
// after each refusal, and returns the admissions in time order.
func hammer(ctx context.Context, l *rateLimiter, workers map[herald.Priority]int, rec *recorder) []admission {
	if rec == nil {
		rec = &recorder{}
	}
	var wg sync.WaitGroup
	for p, n := range workers {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					dec, err := l.allow(ctx, "sms:test", p)
					if err != nil {
						return
					}
					if dec.Allowed {
						if now := time.Now(); l.fresh(dec, now) { // as dispatch checks before a call
							rec.mu.Lock()
							rec.out = append(rec.out, admission{at: now, prio: p, degraded: dec.Degraded})
							rec.mu.Unlock()
						}
						continue
					}
					tm := time.NewTimer(min(dec.Wait, 100*time.Millisecond))
					select {
					case <-tm.C:
					case <-ctx.Done():
						tm.Stop()
					}
				}
			}()
		}
	}
	wg.Wait()
	out := rec.out
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// maxInWindow returns the most admissions matching keep in any half-open window of length w
// (checking the window that starts at every admission covers every window).
func maxInWindow(as []admission, w time.Duration, keep func(admission) bool) int {
	var ts []time.Time
	for _, a := range as {
		if keep(a) {
			ts = append(ts, a.at)
		}
	}
	best := 0
	j := 0
	for i := range ts {
		for j < len(ts) && ts[j].Sub(ts[i]) < w {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

func all(admission) bool { return true }

func TestRateLimiterExactWithReservedShares(t *testing.T) {
	t.Parallel()
	rdb, prefix := stacktest.Redis(t)
	l := newTestLimiter(t, rdb, prefix, 50, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	as := hammer(ctx, l, map[herald.Priority]int{herald.PriorityLow: 6, herald.PriorityNormal: 2, herald.PriorityHigh: 2}, nil)

	require.LessOrEqual(t, maxInWindow(as, time.Second, all), 50)
	low := func(a admission) bool { return a.prio == herald.PriorityLow }
	notHigh := func(a admission) bool { return a.prio != herald.PriorityHigh }
	require.LessOrEqual(t, maxInWindow(as, time.Second, low), 30, "LOW may use 60 %")
	require.LessOrEqual(t, maxInWindow(as, time.Second, notHigh), 45, "LOW+NORMAL may use 90 %")
	require.GreaterOrEqual(t, maxInWindow(as, time.Second, all), 35, "the limiter lets (nearly) the limit through")
	var high int
	for _, a := range as {
		if a.prio == herald.PriorityHigh {
			high++
		}
	}
	require.Greater(t, high, 5*2, "HIGH gets the reserved share while LOW saturates its own")
	t.Logf("admissions: %d (HIGH %d) in 4 s, busiest second %d", len(as), high, maxInWindow(as, time.Second, all))
}

// A Redis crash and restart in the middle of a stream of decisions: while Redis is down the
// process admits only limit/processes per window (after one window of cool-down), HIGH keeps
// being admitted, and the limit holds in every window across both transitions.
func TestRateLimiterRedisCrashAndRestart(t *testing.T) {
	t.Parallel()
	r := startPrivateRedis(t)
	rdb := r.client()
	l := newTestLimiter(t, rdb, "t:", 40, 2)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	done := make(chan []admission)
	go func() {
		done <- hammer(ctx, l, map[herald.Priority]int{herald.PriorityLow: 3, herald.PriorityHigh: 2}, rec)
	}()
	// Each phase lasts until it has admitted a good second's worth, so every phase is seen.
	phase := func(degraded bool, n int) {
		t.Helper()
		since := time.Now()
		require.Eventually(t, func() bool {
			return rec.count(since, func(a admission) bool { return a.degraded == degraded }) >= n
		}, 30*time.Second, 10*time.Millisecond, "phase degraded=%v", degraded)
	}
	phase(false, 60)
	r.stop()
	phase(true, 30)
	r.start()
	phase(false, 60)
	cancel()
	as := <-done

	require.LessOrEqual(t, maxInWindow(as, time.Second, all), 40, "the limit holds across the outage")
	degraded := func(a admission) bool { return a.degraded }
	require.LessOrEqual(t, maxInWindow(as, time.Second, degraded), 20, "limit/processes while Redis is down")
	var highDegraded, after int
	for _, a := range as {
		if a.degraded && a.prio == herald.PriorityHigh {
			highDegraded++
		}
	}
	for i := len(as) - 1; i >= 0 && !as[i].degraded; i-- {
		after++
	}
	require.Positive(t, highDegraded, "HIGH keeps flowing while Redis is down")
	require.Positive(t, after, "decisions go back to Redis once it returns")
	t.Logf("admissions %d, HIGH in degraded mode %d, after recovery %d", len(as), highDegraded, after)
}

// An account's guard is made when the dispatcher starts (prime), not at the account's first
// call: a standby first called a while after the start is admitted at once, where without
// the guard made ahead its first call would wait a whole window. A second prime leaves the
// guard as it is.
func TestPrimedLimiterAdmitsALateFirstCallAtOnce(t *testing.T) {
	t.Parallel()
	rdb, prefix := stacktest.Redis(t)
	l := newTestLimiter(t, rdb, prefix, 10, 1)
	ctx := context.Background()
	l.prime(ctx)
	guard := prefix + "rl:{sms:test}:guard"
	heraldtest.WaitFor(t, 10*time.Second, "the guard's window over, by Redis's clock", func() bool {
		until, err := rdb.Get(ctx, guard).Int64()
		require.NoError(t, err, "prime made the guard")
		now, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		return now.UnixMicro() > until
	})
	l.prime(ctx)
	d, err := l.allow(ctx, "sms:test", herald.PriorityHigh)
	require.NoError(t, err)
	require.True(t, d.Allowed, "the first call waited %v for a guard made at first use", d.Wait)
}
