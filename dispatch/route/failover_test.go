package route

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders"
)

// A total outage of the primary (every call 503) while HIGH OTPs arrive: each HIGH delivery
// that met the primary is retried on the standby at once, without the retry policy's backoff
// (which is minutes here), by the worker whose call failed (no record of the retry's attempt
// was published: it never went back through PENDING, the relay and Kafka), with the attempt
// numbers going on and the attempt log naming both accounts; and once the primary has given
// up its share, HIGH goes to the standby first.
func TestFailoverHighDuringTotalOutage(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	out := &outage{}
	out.down.Store(true)
	primary := &dispatch.MemorySender{ProviderName: "sms:twilio", Behave: out.behave}
	standby := &dispatch.MemorySender{ProviderName: "sms:vonage"}
	cfg := fast()
	cfg.ProbeInterval = time.Minute // no probe during the test: HIGH would only take an overdue one
	r := s.route(cfg, primary, standby)
	dcfg := s.dispatchConfig(nil)
	// A backoff of up to ten minutes: a retry that waited for it would not finish in time.
	dcfg.RetryPolicies[herald.ChannelSMS] = dispatch.RetryPolicy{Base: 10 * time.Minute, Max: 10 * time.Minute, MaxAttempts: 6}
	s.dispatch(dcfg, r)

	began := time.Now()
	first := s.insert(10, herald.PriorityHigh)
	s.waitSent(30*time.Second, first)
	calls := standby.Calls()
	require.NotEmpty(t, calls)
	t.Logf("outage start → first HIGH call on the standby: %v", calls[0].At.Sub(began))
	published := s.recordAttempts(herald.PriorityHigh)
	movedHere := 0
	for _, id := range first {
		as := s.attempts(id)
		last := as[len(as)-1]
		require.Equal(t, "SENT", last.Outcome, id)
		require.Equal(t, "sms:vonage", last.Provider, "the standby sent it")
		require.Equal(t, 1, standby.CallCount(id), "once")
		for i, a := range as[:len(as)-1] {
			require.Equal(t, i+1, a.N, "attempt numbers go on")
			require.Equal(t, "TRANSIENT", a.Outcome)
			require.Equal(t, "sms:twilio", a.Provider, "every failed attempt names the primary")
			require.NotNil(t, a.NextAt)
			require.Less(t, a.NextAt.Sub(a.Finished), 100*time.Millisecond, "retried at once, not after the backoff")
		}
		if len(as) == 2 {
			movedHere++
			// Attempt 1 may have been published twice on a loaded machine (the reaper returns a
			// QUEUED row past its lease; dispatch drops the stale copy); attempt 2 never was.
			require.Contains(t, published[id], 1, id)
			require.NotContains(t, published[id], 2, "%s: the retry on the standby was made by the worker whose call failed", id)
		}
	}
	require.Positive(t, movedHere, "some HIGH deliveries met the primary first")
	lv, err := r.st.levels(context.Background(), r.Sender(herald.ChannelSMS).keys)
	require.NoError(t, err)
	require.Greater(t, lv[0], 0, "the primary gave up at least one step")

	// Keep the outage going until the primary is at its last step; then HIGH goes to the
	// standby first.
	heraldtest.WaitForEvery(t, 30*time.Second, 2*time.Millisecond, "the primary at its last step", func() bool {
		more := s.insert(3, herald.PriorityHigh)
		s.waitSent(30*time.Second, more)
		lv, err := r.st.levels(context.Background(), r.Sender(herald.ChannelSMS).keys)
		require.NoError(t, err)
		return lv[0] == cfg.Steps
	})
	second := s.insert(10, herald.PriorityHigh)
	s.waitSent(30*time.Second, second)
	for _, id := range second {
		as := s.attempts(id)
		require.Len(t, as, 1, id)
		require.Equal(t, "sms:vonage", as[0].Provider)
		require.Zero(t, primary.CallCount(id))
	}
}

// firstAmbiguous answers the first call of each delivery with a timeout (the provider may
// have taken the message) and every later call with success.
func firstAmbiguous(_ context.Context, _ *senders.Message, call int) (senders.Result, error) {
	if call == 1 {
		return senders.Result{}, senders.AmbiguousError("TIMEOUT", context.DeadlineExceeded)
	}
	return senders.Result{}, nil
}

// An ambiguous outcome: NORMAL and LOW retry on the account that may have sent the message,
// the ordinary way (back to PENDING, a record of the retry's attempt; LOW here retries
// ambiguous outcomes, so that there is a retry to route); HIGH moves to the other account,
// since a second OTP costs less than none, at once in the worker whose call timed out.
func TestAmbiguousStaysOnItsAccount(t *testing.T) {
	t.Parallel()
	testAmbiguous(t, fast(), map[herald.Priority]string{herald.PriorityHigh: "sms:vonage",
		herald.PriorityNormal: "sms:twilio", herald.PriorityLow: "sms:twilio"})
}

// A priority whose policy forbids moving an ambiguous outcome keeps it on its account, HIGH
// included: the retry is not made at once on another account.
func TestAmbiguousHighPinnedByItsPolicy(t *testing.T) {
	t.Parallel()
	cfg := fast()
	cfg.FailoverAmbiguous = map[herald.Priority]bool{herald.PriorityHigh: false}
	testAmbiguous(t, cfg, map[herald.Priority]string{herald.PriorityHigh: "sms:twilio",
		herald.PriorityNormal: "sms:twilio", herald.PriorityLow: "sms:twilio"})
}

// testAmbiguous sends 5 deliveries of each priority whose first call is ambiguous and checks
// each retry's account against want: a retry that stays on its account goes back through
// PENDING (a record of attempt 2 is published), one that moves is made at once in the worker.
func testAmbiguous(t *testing.T, cfg Config, want map[herald.Priority]string) {
	s := newStack(t)
	primary := &dispatch.MemorySender{ProviderName: "sms:twilio", Behave: firstAmbiguous}
	standby := &dispatch.MemorySender{ProviderName: "sms:vonage"}
	cfg.MinFailures = 1000 // one ambiguous outcome per delivery must not move the shares here
	r := s.route(cfg, primary, standby)
	dcfg := s.dispatchConfig(nil)
	retry := true
	low := dcfg.Lanes[herald.PriorityLow]
	low.RetryAmbiguous = &retry
	dcfg.Lanes = map[herald.Priority]dispatch.LaneConfig{herald.PriorityHigh: dcfg.Lanes[herald.PriorityHigh],
		herald.PriorityNormal: dcfg.Lanes[herald.PriorityNormal], herald.PriorityLow: low}
	s.dispatch(dcfg, r)

	ids := map[herald.Priority][]string{}
	var all []string
	for _, p := range herald.Priorities {
		ids[p] = s.insert(5, p)
		all = append(all, ids[p]...)
	}
	s.waitSent(60*time.Second, all)
	for p, list := range ids {
		published := s.recordAttempts(p)
		for _, id := range list {
			as := s.attempts(id)
			require.Len(t, as, 2, "%s %s", p, id)
			require.Equal(t, "AMBIGUOUS", as[0].Outcome)
			require.Equal(t, "sms:twilio", as[0].Provider)
			require.Equal(t, "SENT", as[1].Outcome)
			require.Equal(t, want[p], as[1].Provider, "%s's ambiguous retry", p)
			// Which attempts had a record, not how many: a loaded relay may publish one twice.
			require.Contains(t, published[id], 1, "%s %s", p, id)
			if want[p] == as[0].Provider {
				require.Contains(t, published[id], 2, "%s %s: a retry on its account goes back through PENDING", p, id)
			} else {
				require.NotContains(t, published[id], 2, "%s %s: a move is made at once by the worker", p, id)
			}
		}
	}
}

// The standby's own rate limit holds while the primary is down and a LOW backlog drains on
// the standby: in no second does it see more calls than its limit, LOW not more than its
// share, while HIGH OTPs still get through.
func TestStandbyRateLimitHolds(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	out := &outage{}
	out.down.Store(true)
	primary := &dispatch.MemorySender{ProviderName: "sms:twilio", Behave: out.behave}
	standby := &dispatch.MemorySender{ProviderName: "sms:vonage"}
	r := s.route(fast(), primary, standby)
	const limit = 20
	s.dispatch(s.dispatchConfig(map[string]int{"sms:vonage": limit, "sms:twilio": 1000}), r)

	low := s.insert(120, herald.PriorityLow)
	var high []string
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() && len(high) < 20 {
			high = append(high, s.insert(1, herald.PriorityHigh)...)
			time.Sleep(200 * time.Millisecond) // a steady trickle of OTPs, not a wait for anything
		}
	}()
	s.waitSent(90*time.Second, low)
	stop.Store(true)
	<-done
	s.waitSent(30*time.Second, high)

	var times []time.Time
	for _, c := range standby.Calls() {
		times = append(times, c.At)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	fmt.Printf("TestStandbyRateLimitHolds: the standby's busiest second held %d calls (limit %d)\n", most, limit)
	require.LessOrEqual(t, most, limit, "the standby's rate limit")
	require.GreaterOrEqual(t, len(times), len(low)+len(high))
}
