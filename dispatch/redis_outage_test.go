package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// Redis (a private server) crashes and comes back while HIGH deliveries flow, each record
// published twice: no delivery reaches the provider twice (the database claim alone holds
// without the lease), HIGH keeps being delivered during the outage under the per-process
// limit, the provider limit holds in every window, and dispatch uses Redis again afterwards.
func TestRedisOutageDegradedMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := startPrivateRedis(t)
	cfg := e.config()
	cfg.RateLimits = map[string]int{"sms:test": 20}
	cfg.DegradedProcesses = 2
	s := &MemorySender{ProviderName: "sms:test", Latency: 5 * time.Millisecond}
	d := e.start(cfg, r.client(), smsOnly(s))
	e.sweep()

	wave := func() []string {
		ids := e.insertN(30, fixture{})
		e.publish(ids...)
		e.publish(ids...)
		return ids
	}
	before := wave()
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, before...)

	r.stop()
	downAt := time.Now()
	during := wave()
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, during...)
	upAt := time.Now()
	require.False(t, d.limiter.health.down().IsZero(), "dispatch noticed the outage")

	r.start()
	after := wave()
	e.waitStatus(60*time.Second, []herald.Status{herald.StatusSent}, after...)
	require.True(t, d.limiter.health.down().IsZero(), "dispatch left degraded mode")

	for _, id := range append(append(before, during...), after...) {
		require.Equal(t, 1, s.CallCount(id), "delivery %s", id)
		_, n := e.state(id)
		require.Equal(t, 1, n)
	}
	calls := callTimes(s)
	require.LessOrEqual(t, maxInWindow(calls, time.Second, all), 20, "provider limit across the outage")
	inOutage := func(a admission) bool { return a.at.After(downAt) && a.at.Before(upAt) }
	require.LessOrEqual(t, maxInWindow(calls, time.Second, inOutage), 10, "limit/processes during the outage")
	t.Logf("outage %v: %d HIGH deliveries sent without Redis", upAt.Sub(downAt).Round(time.Millisecond), len(during))
}
