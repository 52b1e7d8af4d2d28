package dispatch

import (
	"cmp"
	"context"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/pushtoken"
	"github.com/heraldhq/herald/internal/sleep"
	"github.com/heraldhq/herald/internal/tracelog"
	"github.com/heraldhq/herald/senders"
)

// dbWriteTimeout bounds every database write made after a provider call. Those writes run on
// a context detached from shutdown: an outcome, once the provider was called, must be kept.
const dbWriteTimeout = 10 * time.Second

// finish records the outcome of a claimed attempt's send result and drops the push tokens
// the provider reported invalid.
func (l *lane) finish(w *work, provider string, res senders.Result, sendErr error) error {
	o, _ := l.outcome(w, provider, res, sendErr)
	return l.endAttempt(w, o, res.InvalidTokens)
}

// endAttempt records the attempt's outcome o and drops the push tokens the provider reported
// invalid.
func (l *lane) endAttempt(w *work, o delivery.Outcome, invalidTokens []string) error {
	// The outcome first: the row leaves SENDING as soon as possible (see Config.SendingHold).
	err := l.record(w, o)
	if len(invalidTokens) > 0 {
		l.dropTokens(w, invalidTokens)
	}
	return err
}

// outcome turns a send result into the attempt's outcome and the delivery's next state: SENT;
// a retry (PENDING after the policy's delay) while attempts are left and the error is
// transient, or ambiguous where the lane retries those; FAILED otherwise. atOnce: the retry
// goes to another account without waiting (RoutedSender.RetryAtOnce).
func (l *lane) outcome(w *work, provider string, res senders.Result, sendErr error) (o delivery.Outcome, atOnce bool) {
	o = delivery.Outcome{Status: herald.StatusSent, AttemptClass: herald.AttemptSent, Provider: cmp.Or(res.Provider, provider),
		ProviderID: res.ProviderMessageID, ProviderCode: res.Code, TokensRemoved: len(res.InvalidTokens)}
	if sendErr == nil {
		return o, false
	}
	class, se := senders.Classify(sendErr)
	var retryAfter time.Duration
	if se != nil {
		retryAfter, o.ProviderCode = se.RetryAfter, se.Code
	}
	o.Error = truncate(sendErr.Error(), 1000)
	o.AttemptClass = attemptOutcome(class)
	policy, used := l.d.cfg.RetryPolicies[w.r.Channel], w.r.budgetUsed(w.claimed.Attempt)
	if used < policy.MaxAttempts && (class == senders.Transient || class == senders.Ambiguous && *l.cfg.RetryAmbiguous) {
		// The backoff restarts at its base after a re-drive.
		o.Status, o.RetryIn = herald.StatusPending, l.retryDelay(w.r, policy, used, retryAfter)
		if atOnce = l.retryAtOnce(w.r, w.claimed.Attempt, o.Provider, string(o.AttemptClass)); atOnce {
			o.RetryIn = l.retryDelay(w.r, RetryPolicy{}, used, 0) // another account, now (quiet hours apart)
		}
	} else {
		o.Status = herald.StatusFailed
	}
	return o, atOnce
}

// retryHere ends attempt n of w, which failed with an outcome o that the channel's routing
// retries at once on another account, and makes attempt n+1 in this worker: delivery.RetryNow
// logs attempt n (its account, class and error) and claims n+1 in one conditional write, the
// router picks n+1's account as it would for the retry's own record, and the call goes
// through that account's rate limit. The retry so takes no trip through the outcome's
// commit, the WAL, the relay and Kafka. Where RetryNow cannot be written (the database
// failed), o is recorded the ordinary way, and the retry goes that way too.
func (l *lane) retryHere(w *work, o delivery.Outcome) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), dbWriteTimeout)
	next, ok, err := delivery.RetryNow(ctx, l.d.pool, delivery.Recording{ID: w.r.ID, Attempt: w.claimed.Attempt,
		StartedAt: w.claimed.StartedAt, Outcome: o})
	cancel()
	switch {
	case err != nil:
		l.log.Warn("retry on another account at once", tracelog.Delivery(w.ctx, w.r.ID), zap.Int("attempt", w.claimed.Attempt), zap.Error(err))
		return l.record(w, o)
	case !ok:
		l.log.Warn("outcome not recorded: the row moved on (reaped?)", tracelog.Delivery(w.ctx, w.r.ID),
			zap.Int("attempt", w.claimed.Attempt), zap.String("outcome", string(o.AttemptClass)))
		return nil
	}
	l.ended(w.ctx, w.r, o.AttemptClass, herald.StatusSending, o.Provider)
	w.route = l.moveAccount(w.ctx, w.r, next.Attempt, o.Provider, string(o.AttemptClass))
	w.claimed, w.m.Attempt = next, next.Attempt
	return l.call(w, false)
}

// attemptOutcome is the attempt outcome of a failed send of class c.
func attemptOutcome(c senders.Class) herald.AttemptOutcome {
	switch c {
	case senders.Transient:
		return herald.AttemptTransient
	case senders.Permanent:
		return herald.AttemptPermanent
	}
	return herald.AttemptAmbiguous // what Classify calls an error it cannot place
}

// record writes an attempt's outcome through the lane's group commit. The provider was
// called, so the outcome is known and must not be dropped: while the database cannot be
// reached (or the write times out) it is written again, backing off up to 5 s, until it lands,
// the row turns out to have moved on (the reaper took it: the conditional write then matches
// nothing), or the lane's shutdown deadline passes — then the error goes back and the
// record's offset stays uncommitted. Each write runs on a context detached from shutdown.
func (l *lane) record(w *work, o delivery.Outcome) error {
	fields := func(err error) []zap.Field {
		return []zap.Field{tracelog.Delivery(w.ctx, w.r.ID), zap.Int("attempt", w.claimed.Attempt),
			zap.String("outcome", string(o.AttemptClass)), zap.Error(err)}
	}
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		ok, err := l.outcomes.record(delivery.Recording{ID: w.r.ID, Attempt: w.claimed.Attempt,
			StartedAt: w.claimed.StartedAt, Outcome: o})
		switch {
		case err != nil && unreachable(err):
			l.log.Warn("record outcome: database unreachable, retrying", fields(err)...)
			if sleep.For(w.ctx, backoff) != nil {
				return err
			}
			continue
		case err != nil:
			// The row stays SENDING; the reaper returns it to PENDING with an AMBIGUOUS attempt.
			l.log.Error("record outcome", fields(err)...)
		case !ok:
			l.log.Warn("outcome not recorded: the row moved on (reaped?)", fields(nil)...)
		default:
			l.ended(w.ctx, w.r, o.AttemptClass, o.Status, o.Provider)
		}
		return nil
	}
}

// dropTokens deletes the push tokens a provider reported invalid from the user's rows.
func (l *lane) dropTokens(w *work, tokens []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), dbWriteTimeout)
	defer cancel()
	n, err := pushtoken.Drop(ctx, l.d.pool, w.r.UserID, tokens)
	if err != nil {
		l.log.Warn("drop invalid push tokens", tracelog.Delivery(w.ctx, w.r.ID), zap.Error(err))
	} else if n > 0 {
		l.log.Info("dropped invalid push tokens", tracelog.Delivery(w.ctx, w.r.ID), zap.Int64("tokens", n))
	}
}

// retryDelay is the policy's delay, pushed past the user's quiet hours for NORMAL and LOW.
// The quiet-hour check runs on the database clock read with the row, advanced by the time
// elapsed since (measured on the monotonic clock).
func (l *lane) retryDelay(r *row, policy RetryPolicy, attempt int, retryAfter time.Duration) time.Duration {
	delay := policy.delay(attempt, retryAfter, rand.Float64)
	if l.prio == herald.PriorityHigh {
		return delay
	}
	now := r.DBNow.Add(time.Since(r.loadedAt))
	if end, ok := quietEnd(now.Add(delay), deref(r.TimeZone), r.QuietStart, r.QuietEnd); ok {
		delay = end.Sub(now)
	}
	return delay
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
