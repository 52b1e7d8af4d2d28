package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
)

// reaped puts a delivery where the reaper leaves one whose worker died mid-call: placed
// SENDING with attempt n claimed, then reaped (delivery.ReapSending, zero lease), so PENDING
// and due, attempts = n, and attempt n logged AMBIGUOUS.
func (e *env) reaped(id string, n int) {
	e.t.Helper()
	deliverytest.Place(e.t, e.pool, []string{id}, deliverytest.Spec{Status: herald.StatusSending, Attempts: n})
	require.Equal(e.t, 1, e.reap())
}

// A row the reaper returned from SENDING still obeys the retry policy when a worker picks it
// up again: past MaxAttempts, or with an ambiguous last attempt on a lane that does not retry
// ambiguous outcomes (LOW by default), it ends FAILED without another provider call.
func TestReapedRowObeysRetryPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{}
	cfg := e.config()
	cfg.RetryPolicies = map[herald.Channel]RetryPolicy{herald.ChannelSMS: {MaxAttempts: 3}}
	e.start(cfg, nil, smsOnly(s))

	exhausted := e.insert(fixture{Priority: herald.PriorityHigh})
	e.reaped(exhausted, 3)
	lowAmbiguous := e.insert(fixture{Priority: herald.PriorityLow})
	e.reaped(lowAmbiguous, 1)
	highAmbiguous := e.insert(fixture{Priority: herald.PriorityHigh}) // HIGH retries ambiguous outcomes
	e.reaped(highAmbiguous, 1)

	e.publish(exhausted, lowAmbiguous, highAmbiguous)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusFailed}, exhausted, lowAmbiguous)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, highAmbiguous)

	for id, n := range map[string]int{exhausted: 3, lowAmbiguous: 1} {
		require.Zero(t, s.CallCount(id), "delivery %s", id)
		_, attempts := e.state(id)
		require.Equal(t, n, attempts, "no attempt is added")
		require.Len(t, e.attempts(id), 1, "no attempt row is added")
	}
	require.Equal(t, 1, s.CallCount(highAmbiguous))
	_, attempts := e.state(highAmbiguous)
	require.Equal(t, 2, attempts)
}
