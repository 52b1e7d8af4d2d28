package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// The lane's RateWait bounds the whole wait of a claimed delivery for capacity, however many
// admissions go stale on the way: a stale admission does not restart the wait. (Otherwise the
// row stays SENDING up to (maxStaleAdmissions+1)·RateWait, past what Config.SendingHold
// promises the reaper.) A margin of 1 ns makes every admission stale; with 1 call/s and a
// RateWait of 1.5 s at most one admission fits in the wait.
func TestStaleAdmissionsDoNotExtendRateWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{}
	cfg := e.config()
	cfg.RateLimits = map[string]int{s.Provider(): 1}
	cfg.RateWindowMargin = time.Nanosecond
	high := cfg.Lanes[herald.PriorityHigh]
	high.RateWait = 1500 * time.Millisecond
	cfg.Lanes[herald.PriorityHigh] = high
	d := e.start(cfg, nil, smsOnly(s))

	id := e.insert(fixture{Priority: herald.PriorityHigh})
	e.publish(id)
	sig := signals(d)
	require.Eventually(t, func() bool { return sig.count(herald.PriorityHigh, signalDeferred) == 1 }, 30*time.Second, 10*time.Millisecond)
	require.Less(t, sig.count(herald.PriorityHigh, signalStaleAdmission), int64(maxStaleAdmissions), "stale admissions restarted the rate wait")
	require.Zero(t, s.CallCount(id))
	st, n := e.state(id)
	require.Equal(t, herald.StatusPending, st)
	require.Zero(t, n, "a deferral uses no attempt")
}
