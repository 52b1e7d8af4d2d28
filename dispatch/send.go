package dispatch

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/senders"
)

// maxStaleAdmissions is how many admissions a delivery may let go stale (see
// rateLimiter.fresh) before it is deferred instead.
const maxStaleAdmissions = 3

// expiredWaiting ends a claimed attempt whose delivery expired while it waited for
// rate-limit capacity: no provider was called.
var expiredWaiting = delivery.Outcome{Status: herald.StatusExpired, AttemptClass: herald.AttemptExpired,
	Error: "expired while waiting for rate-limit capacity"}

// send makes the provider call of a claimed attempt once the rate limiter admits it, and
// records the outcome. An attempt that cannot be sent ends at once, without a call.
func (l *lane) send(w *work) error {
	if w.buildErr != nil {
		return l.finish(w, "", senders.Result{}, w.buildErr)
	}
	w.m.Attempt = w.claimed.Attempt
	if f, ok := w.route.sender.(FanOutSender); ok {
		return l.sendEach(w, f) // one slot per provider call
	}
	return l.call(w, true)
}

// call makes the claimed attempt's provider call through w.route once the rate limiter
// admits it, and ends the attempt. mayMove: a failure that the channel's routing retries at
// once on another account is retried here, in this worker (retryHere); the retry's own
// failure takes the ordinary way back to PENDING, so one claim makes at most two calls.
func (l *lane) call(w *work, mayMove bool) error {
	sendCtx, cancel, err := l.admitCall(w)
	if sendCtx == nil {
		return err // deferred, or expired while waiting
	}
	res, sendErr := w.route.sender.Send(sendCtx, w.m)
	cancel()
	o, atOnce := l.outcome(w, w.route.account, res, sendErr)
	if mayMove && atOnce && !w.r.expiredNow() {
		return l.retryHere(w, o)
	}
	return l.endAttempt(w, o, res.InvalidTokens)
}

// admitCall waits until the rate limiter admits the attempt's call and returns the call's
// context, bounded by SendTimeout. The limiter is asked after the claim, right before the
// call, so that the time between the decision and the provider call holds no database write;
// an admission that got old before the call (see rateLimiter.fresh) is not used. A refusal
// hands the claim back (no attempt used), and a delivery that expired while waiting is ended
// EXPIRED: then the context is nil.
func (l *lane) admitCall(w *work) (context.Context, context.CancelFunc, error) {
	// One deadline for every round: a stale admission does not restart the wait, so the row
	// stays SENDING at most RateWait before the call (see Config.SendingHold).
	deadline := time.Now().Add(max(l.cfg.RateWait, 0))
	for stale := 0; ; stale++ {
		allowed, wait, admitted, err := l.waitForRate(w.ctx, w.route.account, w.claimed.Attempt, deadline)
		if err == nil && allowed && stale == maxStaleAdmissions {
			// The machine is too slow to use admissions in time: give the claim back and
			// let the sweeper bring the delivery round again.
			allowed, wait = false, 100*time.Millisecond
		}
		switch {
		case err != nil || !allowed:
			return nil, nil, l.deferAttempt(w, w.route.account, wait, err)
		case w.r.expiredNow():
			return nil, nil, l.record(w, expiredWaiting)
		case l.d.limiter.fresh(admitted, time.Now()):
			ctx, cancel := context.WithTimeout(w.ctx, l.d.cfg.SendTimeout)
			return ctx, cancel, nil
		}
		l.signal(signalStaleAdmission)
	}
}

// deferAttempt hands back a claim the limiter refused (or could not decide: limErr), due
// again after wait; no attempt is used.
func (l *lane) deferAttempt(w *work, account string, wait time.Duration, limErr error) error {
	w.handedBack = true
	ok, err := delivery.Unclaim(context.WithoutCancel(w.ctx), l.d.pool, w.r.ID, w.claimed.Attempt, wait)
	if ok && limErr == nil {
		l.signal(signalDeferred)
		l.d.metrics.deferrals.Add(w.ctx, 1, metric.WithAttributes(attribute.String("priority", string(l.prio)),
			attribute.String("provider", account)))
	}
	return errors.Join(limErr, err)
}

// waitForRate asks the limiter until it admits the call, or until deadline (the end of the
// lane's RateWait) passes or the lane stops; allowed=false comes with how long to defer.
func (l *lane) waitForRate(ctx context.Context, provider string, attempt int, deadline time.Time) (allowed bool, wait time.Duration, admitted decision, err error) {
	_, span := tracer.Start(ctx, "dispatch.rate_limit", trace.WithAttributes(attribute.String("herald.provider", provider),
		attribute.Int("herald.attempt", attempt)))
	defer span.End()
	begin := time.Now()
	refused := false
	defer func() {
		if refused {
			l.d.metrics.waits.Record(ctx, time.Since(begin).Seconds(), l.attrs)
		}
		span.SetAttributes(attribute.Bool("herald.rate_limit.allowed", allowed),
			attribute.Int64("herald.rate_limit.wait_ms", time.Since(begin).Milliseconds()))
	}()
	for {
		dec, err := l.d.limiter.allow(ctx, provider, l.prio)
		if err != nil || dec.Allowed {
			return err == nil, 0, dec, err
		}
		if !refused {
			refused = true
			l.signal(signalRateRefused)
		}
		// A little jitter spreads waiters that were all told the same instant.
		pause := dec.Wait + time.Duration(rand.Int64N(int64(2*time.Millisecond)))
		if time.Now().Add(pause).After(deadline) || !l.pause(ctx, pause) {
			return false, pause, dec, nil
		}
	}
}

// pause waits d, or until the lane stops or ctx ends (false).
func (l *lane) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.stopping:
		return false
	case <-ctx.Done():
		return false
	}
}
