package dispatch

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/tracelog"
	"github.com/heraldhq/herald/senders"
)

// maxStaleAdmissions is how many admissions a delivery may let go stale (see
// rateLimiter.fresh) before it is deferred instead.
const maxStaleAdmissions = 3

// dbWriteTimeout bounds every database write made after a provider call. Those writes run on
// a context detached from shutdown: an outcome, once the provider was called, must be kept.
const dbWriteTimeout = 10 * time.Second

// process handles one Kafka record. The record only names the delivery; the row is the truth,
// so duplicates, stale records and records of rows already finished are harmless. An error
// means the database could not be reached; the lane retries the record.
func (l *lane) process(ctx context.Context, rec *kgo.Record) error {
	msg, err := herald.UnmarshalDeliveryMessage(rec.Value)
	if err != nil {
		l.log.Error("skip undecodable record", zap.String("topic", rec.Topic),
			zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset), zap.Error(err))
		return nil
	}
	ctx = propagation.TraceContext{}.Extract(ctx, headerCarrier(rec.Headers))
	ctx, span := tracer.Start(ctx, "dispatch.deliver", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("herald.delivery_id", msg.DeliveryID),
			attribute.String("herald.priority", string(l.prio)),
			attribute.String("messaging.destination.name", rec.Topic)))
	defer span.End()
	l.d.metrics.lag.Record(ctx, time.Since(rec.Timestamp).Seconds(), l.attrs)

	// A claim can lose to a change made between read and claim (a racing worker, expiry
	// during a rate-limit wait); reading again settles what happened.
	for range 3 {
		again, err := l.attemptVisible(ctx, msg, span)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "dispatch failed")
			return err
		}
		if !again {
			return nil
		}
	}
	return nil
}

// A transaction's commit record reaches the WAL, and so the relay and Kafka, a moment before
// the transaction becomes visible to other sessions. A worker fast enough to read the row in
// that moment sees the version before the published one: no row at all for a new delivery,
// or the SENDING version a reaper just returned to PENDING. Such a read is retried for up to
// staleReadWait before the record is taken at its word; dropping it at once would leave the
// row to the reaper, a delay of seconds to minutes.
const (
	staleReadWait  = time.Second
	staleReadFirst = time.Millisecond
)

// attemptVisible runs attempt, waiting out a read that does not yet see the published
// version of the row.
func (l *lane) attemptVisible(ctx context.Context, msg herald.DeliveryMessage, span trace.Span) (again bool, err error) {
	deadline := time.Now().Add(staleReadWait)
	for wait := staleReadFirst; ; wait *= 2 {
		again, err = l.attempt(ctx, msg, span, time.Now().Before(deadline))
		if !errors.Is(err, errStaleRead) {
			return again, err
		}
		l.stats.staleReads.Add(1)
		t := time.NewTimer(min(wait, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// errStaleRead says the read saw an older version of the row than the record was made from.
var errStaleRead = errors.New("row read older than its record")

// attempt runs one read → lease → claim → rate limit → send → record pass. again=true asks
// for another pass after the row changed underneath. With mayBeStale, a read older than the
// record returns errStaleRead.
func (l *lane) attempt(ctx context.Context, msg herald.DeliveryMessage, span trace.Span, mayBeStale bool) (again bool, err error) {
	d := l.d
	id := msg.DeliveryID
	r, err := load(ctx, d.pool, id)
	if errors.Is(err, errNotFound) {
		if mayBeStale {
			return false, errStaleRead
		}
		l.log.Warn("record names an unknown delivery", tracelog.Delivery(ctx, id))
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The record was made from a PENDING version with msg.Attempts attempts. Fewer attempts,
	// or SENDING with as many (a claim adds one), is a version from before it.
	if mayBeStale && (r.Attempts < msg.Attempts || (r.Status == herald.StatusSending && r.Attempts == msg.Attempts)) {
		return false, errStaleRead
	}
	switch {
	case r.Status.Terminal(), r.Status == herald.StatusSending:
		return false, nil // finished, or a provider call is in flight elsewhere
	case r.Expired:
		ok, err := delivery.Expire(ctx, d.pool, id, r.Attempts)
		if ok {
			l.ended(ctx, r, "EXPIRED", herald.StatusExpired, "")
		}
		return !ok && err == nil, err
	case !r.Due:
		return false, nil // a scheduled send or a retry: the sweeper publishes it when due
	}
	if reason := l.noMoreAttempts(r); reason != "" {
		ok, err := delivery.GiveUp(ctx, d.pool, id, r.Attempts, reason)
		if ok {
			l.ended(ctx, r, "GAVE_UP", herald.StatusFailed, "")
		}
		return !ok && err == nil, err
	}
	attempt := r.Attempts + 1
	span.SetAttributes(attribute.Int("herald.attempt", attempt), attribute.String("herald.channel", string(r.Channel)))

	sender := d.senders[r.Channel]
	var m *senders.Message
	var buildErr error
	if sender == nil {
		buildErr = senders.PermanentError("NO_SENDER", errors.New("no sender configured for channel "+string(r.Channel)))
	} else if m, buildErr = r.message(ctx, d.cfg.Renderer, attempt); buildErr != nil {
		code := "RENDER"
		if errors.Is(buildErr, errNoRecipient) {
			code = "NO_RECIPIENT"
		}
		buildErr = senders.PermanentError(code, buildErr)
	}
	if buildErr != nil { // nothing to send: end the attempt without a provider call
		att, started, ok, err := delivery.Claim(ctx, d.pool, id, r.Attempts)
		if err != nil || !ok {
			return !ok && err == nil, err
		}
		return false, l.finish(ctx, r, att, started, "", senders.Result{}, buildErr)
	}

	leaseTTL := d.cfg.SendTimeout + max(l.cfg.RateWait, 0) + 10*time.Second
	_, lspan := tracer.Start(ctx, "dispatch.lease", trace.WithAttributes(attribute.Int("herald.attempt", attempt)))
	held, skipped := d.leases.acquire(ctx, id, attempt, d.token, leaseTTL, d.redisTimeout)
	lspan.SetAttributes(attribute.Bool("herald.lease.held", held), attribute.Bool("herald.degraded", skipped))
	lspan.End()
	if !held {
		return false, nil // another worker is on this attempt
	}
	if !skipped {
		defer d.leases.release(context.WithoutCancel(ctx), id, attempt, d.token, d.redisTimeout)
	}

	att, started, ok, err := delivery.Claim(ctx, d.pool, id, r.Attempts)
	if err != nil || !ok {
		return !ok && err == nil, err
	}
	m.Attempt = att
	return false, l.send(ctx, r, m, sender, att, started)
}

// noMoreAttempts applies the retry policy to a PENDING row whose last attempt did not go
// through finish: the reaper returned it from SENDING (worker died, or its outcome could not be
// written) and logged that attempt AMBIGUOUS. finish never schedules such a row again, so this
// is where MaxAttempts and RetryAmbiguous hold for it. It returns why no attempt may follow,
// or "".
func (l *lane) noMoreAttempts(r *row) string {
	if limit := l.d.cfg.RetryPolicies[r.Channel].MaxAttempts; r.Attempts >= limit {
		return "attempts exhausted"
	}
	if r.LastOutcome != nil && *r.LastOutcome == "AMBIGUOUS" && !*l.cfg.RetryAmbiguous {
		return "ambiguous outcome not retried"
	}
	return ""
}

// send makes the provider call of a claimed attempt once the rate limiter admits it, and
// records the outcome.
func (l *lane) send(ctx context.Context, r *row, m *senders.Message, sender Sender, att int, started time.Time) error {
	sender = route(ctx, r, sender, att) // the account, before its rate limit
	if f, ok := sender.(FanOutSender); ok {
		return l.sendEach(ctx, r, m, f, att, started) // one slot per provider call
	}
	d := l.d
	provider := sender.Provider()
	// The limiter is asked after the claim, right before the call, so that the time between
	// the decision and the provider call holds no database write; an admission that got old
	// before the call (see rateLimiter.fresh) is not used. A refusal hands the claim back: no
	// attempt is used.
	var (
		sendCtx context.Context
		sspan   trace.Span
		cancel  context.CancelFunc
	)
	// One deadline for every round: a stale admission does not restart the wait, so the row
	// stays SENDING at most RateWait before the call (see Config.SendingHold).
	deadline := time.Now().Add(max(l.cfg.RateWait, 0))
	for stale := 0; ; stale++ {
		allowed, wait, admitted, err := l.waitForRate(ctx, provider, att, deadline)
		if err == nil && allowed && stale == maxStaleAdmissions {
			// The machine is too slow to use admissions in time: give the claim back and
			// let the sweeper bring the delivery round again.
			allowed, wait = false, 100*time.Millisecond
		}
		if err != nil || !allowed {
			ok, uerr := delivery.Unclaim(context.WithoutCancel(ctx), d.pool, r.ID, att, wait)
			if ok && err == nil {
				l.stats.deferred.Add(1)
				d.metrics.deferrals.Add(ctx, 1, metric.WithAttributes(attribute.String("priority", string(l.prio)),
					attribute.String("provider", provider)))
			}
			return errors.Join(err, uerr)
		}
		if r.ExpiresAt != nil && !r.DBNow.Add(time.Since(r.loadedAt)).Before(*r.ExpiresAt) {
			// It expired while waiting for capacity: end it without a call.
			return l.record(ctx, r, att, started, delivery.Outcome{Status: herald.StatusExpired, AttemptClass: "EXPIRED",
				Error: "expired while waiting for rate-limit capacity"})
		}
		sendCtx, cancel = context.WithTimeout(ctx, d.cfg.SendTimeout)
		sendCtx, sspan = tracer.Start(sendCtx, "dispatch.send", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.Int("herald.attempt", att), attribute.String("herald.provider", provider)))
		if d.limiter.fresh(admitted, time.Now()) {
			break
		}
		sspan.End()
		cancel()
		l.stats.stale.Add(1)
	}
	l.stats.sends.Add(1)
	res, sendErr := sender.Send(sendCtx, m)
	if sendErr != nil {
		sspan.RecordError(sendErr)
		sspan.SetStatus(codes.Error, "send failed")
	}
	sspan.End()
	cancel()
	return l.finish(ctx, r, att, started, provider, res, sendErr)
}

// waitForRate asks the limiter until it admits the call, or until deadline (the end of the
// lane's RateWait) passes or the lane stops; allowed=false comes with how long to defer.
func (l *lane) waitForRate(ctx context.Context, provider string, attempt int, deadline time.Time) (allowed bool, wait time.Duration, admitted decision, err error) {
	d := l.d
	_, span := tracer.Start(ctx, "dispatch.rate_limit", trace.WithAttributes(attribute.String("herald.provider", provider),
		attribute.Int("herald.attempt", attempt)))
	defer span.End()
	begin := time.Now()
	refused := false
	defer func() {
		if refused {
			d.metrics.waits.Record(ctx, time.Since(begin).Seconds(), l.attrs)
		}
		span.SetAttributes(attribute.Bool("herald.rate_limit.allowed", allowed),
			attribute.Int64("herald.rate_limit.wait_ms", time.Since(begin).Milliseconds()))
	}()
	for {
		dec, err := d.limiter.allow(ctx, provider, l.prio)
		if err != nil {
			return false, 0, dec, err
		}
		if dec.Allowed {
			return true, 0, dec, nil
		}
		if !refused {
			refused = true
			l.stats.rateRefused.Add(1)
		}
		// A little jitter spreads waiters that were all told the same instant.
		pause := dec.Wait + time.Duration(rand.Int64N(int64(2*time.Millisecond)))
		if time.Now().Add(pause).After(deadline) {
			return false, pause, dec, nil
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-l.stopping:
			t.Stop()
			return false, pause, dec, nil
		case <-ctx.Done():
			t.Stop()
			return false, pause, dec, nil
		}
	}
}

// finish turns a send result into the delivery's next state and records it.
func (l *lane) finish(ctx context.Context, r *row, attempt int, started time.Time, provider string, res senders.Result, sendErr error) error {
	d := l.d
	o := delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: provider,
		ProviderID: res.ProviderMessageID, ProviderCode: res.Code}
	if res.Provider != "" {
		o.Provider = res.Provider
	}
	if sendErr != nil {
		class, se := senders.Classify(sendErr)
		var retryAfter time.Duration
		if se != nil {
			retryAfter, o.ProviderCode = se.RetryAfter, se.Code
		}
		o.Error = truncate(sendErr.Error(), 1000)
		o.AttemptClass = class.String()
		policy := d.cfg.RetryPolicies[r.Channel]
		retry := attempt < policy.MaxAttempts && (class == senders.Transient ||
			class == senders.Ambiguous && *l.cfg.RetryAmbiguous)
		if retry {
			o.Status = herald.StatusPending
			o.RetryIn = l.retryDelay(r, policy, attempt, retryAfter)
			if l.retryAtOnce(r, attempt, o.Provider, o.AttemptClass) {
				o.RetryIn = l.retryDelay(r, RetryPolicy{}, attempt, 0) // another account, now (quiet hours apart)
			}
		} else {
			o.Status = herald.StatusFailed
		}
	}
	// The outcome first: the row leaves SENDING as soon as possible (see Config.SendingHold).
	recErr := l.record(ctx, r, attempt, started, o)
	if len(res.InvalidTokens) > 0 {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbWriteTimeout)
		n, err := dropPushTokens(wctx, d.pool, r.UserID, res.InvalidTokens)
		cancel()
		if err != nil {
			l.log.Warn("drop invalid push tokens", tracelog.Delivery(ctx, r.ID), zap.Error(err))
		} else if n > 0 {
			l.log.Info("dropped invalid push tokens", tracelog.Delivery(ctx, r.ID), zap.Int64("tokens", n))
		}
	}
	return recErr
}

// record writes an attempt's outcome. The provider was called, so the outcome is known and
// must not be dropped: while the database cannot be reached (or the write times out) it is
// written again, backing off up to 5 s, until it lands, the row turns out to have moved on
// (the reaper took it: the conditional write then matches nothing), or the lane's shutdown
// deadline passes — then the error goes back and the record's offset stays uncommitted.
// Each write runs on a context detached from shutdown.
func (l *lane) record(ctx context.Context, r *row, attempt int, started time.Time, o delivery.Outcome) error {
	backoff := 100 * time.Millisecond
	for {
		ok, err := l.outcomes.record(delivery.Recording{ID: r.ID, Attempt: attempt, StartedAt: started, Outcome: o})
		if err != nil && unreachable(err) {
			l.log.Warn("record outcome: database unreachable, retrying", tracelog.Delivery(ctx, r.ID),
				zap.Int("attempt", attempt), zap.String("outcome", o.AttemptClass), zap.Error(err))
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return err
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if err != nil {
			// The row stays SENDING; the reaper returns it to PENDING with an AMBIGUOUS attempt.
			l.log.Error("record outcome", tracelog.Delivery(ctx, r.ID), zap.Int("attempt", attempt),
				zap.String("outcome", o.AttemptClass), zap.Error(err))
			return nil
		}
		if !ok {
			l.log.Warn("outcome not recorded: the row moved on (reaped?)", tracelog.Delivery(ctx, r.ID),
				zap.Int("attempt", attempt), zap.String("outcome", o.AttemptClass))
			return nil
		}
		l.ended(ctx, r, o.AttemptClass, o.Status, o.Provider)
		return nil
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
