package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// The same record delivered three times, to two workers in separate groups that both see
// every record: each delivery reaches the provider exactly once.
func TestDuplicateRecordsAndRacingWorkersSendOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{Latency: 30 * time.Millisecond}
	d1 := e.start(e.config(), nil, smsOnly(s))
	d2 := e.start(e.config(), nil, smsOnly(s)) // its own groups: a second worker racing for every record

	var ids []string
	for range 20 {
		ids = append(ids, e.insert(fixture{}))
	}
	for range 3 {
		e.publish(ids...)
	}
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, ids...)
	// Let both workers go through all three copies of every record before counting calls.
	require.Eventually(t, func() bool {
		return signals(d1).count(herald.PriorityHigh, signalProcessed) >= 60 &&
			signals(d2).count(herald.PriorityHigh, signalProcessed) >= 60
	}, 30*time.Second, 10*time.Millisecond)
	for _, id := range ids {
		require.Equal(t, 1, s.CallCount(id), "delivery %s", id)
		st, n := e.state(id)
		require.Equal(t, herald.StatusSent, st)
		require.Equal(t, 1, n)
		as := e.attempts(id)
		require.Len(t, as, 1)
		require.Equal(t, "SENT", as[0].Outcome)
	}
}

func TestPermanentErrorFailsAfterOneAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{Behave: func(context.Context, *senders.Message, int) (senders.Result, error) {
		return senders.Result{}, senders.PermanentError("21211", errors.New("invalid number"))
	}}
	e.start(e.config(), nil, smsOnly(s))
	e.sweep()
	id := e.insert(fixture{})
	e.publish(id)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusFailed}, id)
	_, n := e.state(id)
	require.Equal(t, 1, n)
	require.Equal(t, 1, s.CallCount(id))
	as := e.attempts(id)
	require.Len(t, as, 1)
	require.Equal(t, "PERMANENT", as[0].Outcome)
	require.Equal(t, "21211", *as[0].Code)
	require.Nil(t, as[0].NextAttempt)
}

// Transient errors: every retry is scheduled within [0, min(max, base·2^(n-1))] of the
// attempt's end, no call happens before its retry is due, and the delivery ends FAILED
// after the last attempt with the last error.
func TestTransientErrorsFollowBackoffThenFail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	policy := RetryPolicy{Base: 100 * time.Millisecond, Max: 300 * time.Millisecond, MaxAttempts: 4}
	cfg := e.config()
	cfg.RetryPolicies = map[herald.Channel]RetryPolicy{herald.ChannelSMS: policy}
	s := &MemorySender{Behave: func(_ context.Context, _ *senders.Message, call int) (senders.Result, error) {
		return senders.Result{}, senders.TransientError("503", 0, errors.New("unavailable"))
	}}
	e.start(cfg, nil, smsOnly(s))
	e.sweep()

	var ids []string
	for range 5 {
		ids = append(ids, e.insert(fixture{}))
	}
	e.publish(ids...)
	e.waitStatus(60*time.Second, []herald.Status{herald.StatusFailed}, ids...)

	calls := s.Calls()
	var delays []time.Duration
	for _, id := range ids {
		st, n := e.state(id)
		require.Equal(t, herald.StatusFailed, st)
		require.Equal(t, policy.MaxAttempts, n)
		require.Equal(t, policy.MaxAttempts, s.CallCount(id))
		as := e.attempts(id)
		require.Len(t, as, policy.MaxAttempts)
		var callTimes []time.Time
		for _, c := range calls {
			if c.Message.DeliveryID == id {
				callTimes = append(callTimes, c.At)
			}
		}
		for i, a := range as {
			require.Equal(t, i+1, a.Attempt)
			require.Equal(t, "TRANSIENT", a.Outcome)
			if a.Attempt == policy.MaxAttempts {
				require.Nil(t, a.NextAttempt, "the last attempt schedules nothing")
				require.Contains(t, *a.ErrorMessage, "unavailable")
				continue
			}
			require.NotNil(t, a.NextAttempt)
			d := a.NextAttempt.Sub(a.FinishedAt)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.LessOrEqual(t, d, policy.ceiling(a.Attempt), "attempt %d delay %v", a.Attempt, d)
			require.False(t, callTimes[i+1].Before(a.NextAttempt.Add(-time.Millisecond)),
				"attempt %d called at %v before it was due at %v", a.Attempt+1, callTimes[i+1], *a.NextAttempt)
			delays = append(delays, d)
		}
	}
	distinct := map[time.Duration]bool{}
	for _, d := range delays {
		distinct[d] = true
	}
	require.Greater(t, len(distinct), len(delays)/2, "delays are jittered: %v", delays)
	t.Logf("retry delays: %v", delays)
}

func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.RetryPolicies = map[herald.Channel]RetryPolicy{herald.ChannelSMS: {Base: 10 * time.Millisecond, Max: 20 * time.Millisecond, MaxAttempts: 3}}
	const retryAfter = 1500 * time.Millisecond
	s := &MemorySender{Behave: func(_ context.Context, m *senders.Message, call int) (senders.Result, error) {
		if call == 1 {
			return senders.Result{}, senders.TransientError("429", retryAfter, errors.New("too many requests"))
		}
		return senders.Result{Provider: "memory", ProviderMessageID: "ok"}, nil
	}}
	e.start(cfg, nil, smsOnly(s))
	e.sweep()
	id := e.insert(fixture{})
	e.publish(id)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)
	as := e.attempts(id)
	require.Len(t, as, 2)
	require.Equal(t, "TRANSIENT", as[0].Outcome)
	require.GreaterOrEqual(t, as[0].NextAttempt.Sub(as[0].FinishedAt), retryAfter)
	calls := s.Calls()
	require.Len(t, calls, 2)
	require.GreaterOrEqual(t, calls[1].At.Sub(calls[0].At), retryAfter)
	_, n := e.state(id)
	require.Equal(t, 2, n)
}

// An expired delivery ends EXPIRED without a provider call; one not yet due is left alone.
func TestExpiredDeliveryIsNeverSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{}
	d := e.start(e.config(), nil, smsOnly(s))
	expired := e.insert(fixture{ExpiresIn: -time.Second})
	later := e.insert(fixture{DueIn: time.Hour})
	fresh := e.insert(fixture{ExpiresIn: time.Hour})
	e.publish(expired, later, fresh)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusExpired}, expired)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, fresh)
	require.Equal(t, 0, s.CallCount(expired))
	as := e.attempts(expired)
	require.Len(t, as, 1)
	require.Equal(t, "EXPIRED", as[0].Outcome)
	// The not-yet-due row's record was processed too, and the row left PENDING untouched.
	require.Eventually(t, func() bool { return signals(d).count(herald.PriorityHigh, signalProcessed) >= 3 },
		30*time.Second, 10*time.Millisecond)
	st, n := e.state(later)
	require.Equal(t, herald.StatusPending, st)
	require.Equal(t, 0, n)
	require.Equal(t, 0, s.CallCount(later))
}

// A NORMAL retry that would fall inside the user's quiet hours moves to their end; a HIGH
// retry ignores them.
func TestRetryRespectsQuietHoursExceptHigh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.RetryPolicies = map[herald.Channel]RetryPolicy{herald.ChannelSMS: {Base: 50 * time.Millisecond, Max: 50 * time.Millisecond, MaxAttempts: 3}}
	s := &MemorySender{Behave: func(_ context.Context, _ *senders.Message, call int) (senders.Result, error) {
		return senders.Result{}, senders.TransientError("503", 0, errors.New("unavailable"))
	}}
	e.start(cfg, nil, smsOnly(s))
	normal := e.insert(fixture{Priority: herald.PriorityNormal, UserID: 7})
	high := e.insert(fixture{Priority: herald.PriorityHigh, UserID: 7})
	_, err := e.pool.Exec(context.Background(), `INSERT INTO user_preference (user_id, quiet_start, quiet_end)
		VALUES (7, (now() AT TIME ZONE 'UTC' - interval '1 hour')::time, (now() AT TIME ZONE 'UTC' + interval '2 hours')::time)`)
	require.NoError(t, err)
	e.publish(normal, high)

	var as []attemptRow
	require.Eventually(t, func() bool {
		as = e.attempts(normal)
		return len(as) == 1 && len(e.attempts(high)) == 1
	}, 30*time.Second, 10*time.Millisecond)
	d := as[0].NextAttempt.Sub(as[0].FinishedAt)
	require.Greater(t, d, 119*time.Minute, "NORMAL retry moved to the end of quiet hours, got %v", d)
	require.LessOrEqual(t, d, 2*time.Hour)
	h := e.attempts(high)[0]
	require.LessOrEqual(t, h.NextAttempt.Sub(h.FinishedAt), 50*time.Millisecond, "HIGH bypasses quiet hours")
}

// A push delivery goes to the user's stored tokens; tokens the provider reports invalid are
// removed from push_token.
func TestPushTokensFromContactAndInvalidOnesDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{ProviderName: "push:test", Behave: func(_ context.Context, m *senders.Message, _ int) (senders.Result, error) {
		return senders.Result{Provider: "push:test", InvalidTokens: []string{"tok-a"}}, nil
	}}
	e.start(e.config(), nil, map[herald.Channel]Sender{herald.ChannelPush: s})
	id := e.insert(fixture{Channel: herald.ChannelPush, UserID: 9})
	_, err := e.pool.Exec(context.Background(), `INSERT INTO push_token (user_id, token, platform)
		VALUES (9, 'tok-a', 'FCM'), (9, 'tok-b', 'APNS')`)
	require.NoError(t, err)
	e.publish(id)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)

	calls := s.Calls()
	require.Len(t, calls, 1)
	require.ElementsMatch(t, []senders.PushToken{{Token: "tok-a", Platform: "FCM"}, {Token: "tok-b", Platform: "APNS"}},
		calls[0].Message.To.PushTokens)
	require.JSONEq(t, `{"code":"123456"}`, string(calls[0].Message.Payload))
	require.Equal(t, "otp", calls[0].Message.Content.Body, "no template row: the default renderer uses the name")
	// Invalid tokens are dropped just after the outcome is written: wait for it.
	tokens := func() []string {
		var left []string
		rows, err := e.pool.Query(context.Background(), `SELECT token FROM push_token WHERE user_id = 9 ORDER BY token`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var tok string
			require.NoError(t, rows.Scan(&tok))
			left = append(left, tok)
		}
		require.NoError(t, rows.Err())
		return left
	}
	require.Eventually(t, func() bool { return len(tokens()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"tok-b"}, tokens())
	// The attempt log says how many were removed (the timeline and the events show it).
	var removed int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT tokens_removed FROM delivery_attempt WHERE delivery_id = $1 AND attempt = 1`, id).Scan(&removed))
	require.Equal(t, 1, removed)
}
