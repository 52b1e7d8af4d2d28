package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/senders"
)

// route is who makes an attempt's provider call, and under which rate-limit account.
type route struct {
	sender  Sender
	account string // the rate-limit key of the call; a FanOutSender's calls each use their own
}

// routeFor picks the sender and the rate-limit account of attempt of r: the sender of its
// channel or, for a channel with several provider accounts (a RoutedSender, dispatch/route),
// the account its router picks, under that account's name. It is the one place the choice is
// made, before the rate-limit decision, so the limiter, the metrics and the attempt log all
// count the account. No sender for the channel is a permanent failure of the attempt.
func (l *lane) routeFor(ctx context.Context, r *row, attempt int) (route, error) {
	s := l.d.senders[r.Channel]
	if s == nil {
		return route{}, senders.PermanentError("NO_SENDER",
			errors.New("no sender configured for channel "+string(r.Channel)))
	}
	s = pickAccount(ctx, r, s, attempt)
	return route{sender: s, account: s.Provider()}, nil
}

// prepare routes the attempt a record is to make and builds its message. An attempt that
// cannot be sent (no sender, no recipient, a template that does not render) keeps why in
// buildErr: it is leased and claimed like any other and ends without a provider call.
func (l *lane) prepare(w *work) {
	attempt := w.r.Attempts + 1
	trace.SpanFromContext(w.ctx).SetAttributes(attribute.Int("herald.attempt", attempt),
		attribute.String("herald.channel", string(w.r.Channel)))
	if w.route, w.buildErr = l.routeFor(w.ctx, w.r, attempt); w.buildErr != nil {
		return
	}
	m, err := w.r.message(w.ctx, l.d.cfg.Renderer, attempt)
	if err != nil {
		code := "RENDER"
		if errors.Is(err, errNoRecipient) {
			code = "NO_RECIPIENT"
		}
		w.buildErr = senders.PermanentError(code, err)
	}
	w.m = m
}

// leaseClaimSend leases the attempts of ws (one Redis pipeline), claims the leased rows (one
// statement) and makes each claimed attempt in its own goroutine (attempt).
func (l *lane) leaseClaimSend(ctx context.Context, ws []*work, end func(*work, result)) {
	if len(ws) == 0 {
		return
	}
	leased := l.lease(ctx, ws, end)
	seen := make([]delivery.Seen, len(leased))
	for i, w := range leased {
		seen[i] = delivery.Seen{ID: w.r.ID, Attempts: w.r.Attempts}
		trace.SpanFromContext(w.ctx).AddEvent(eventClaimStarted)
	}
	claimed, err := l.claim(ctx, l.d.pool, seen)
	var sends sync.WaitGroup
	for _, w := range leased {
		if err != nil { // the leases go back first, then the next pass settles what happened
			l.release(w)
			w.err = err
			end(w, resFailed)
			continue
		}
		cl, ok := claimed[w.r.ID]
		sends.Add(1)
		go func() {
			defer sends.Done()
			end(w, l.attempt(ctx, w, cl, ok, len(leased) > 1))
		}()
	}
	sends.Wait()
}

// leaseTTL is how long an attempt's lease lasts: past the claim's rate-limit wait and the
// provider call, with room to record the outcome.
func (l *lane) leaseTTL() time.Duration {
	return l.d.cfg.SendTimeout + max(l.cfg.RateWait, 0) + 10*time.Second
}

// lease takes the Redis lease of the attempt of each of ws in one round trip and returns the
// records whose lease this worker now holds; for a record whose attempt another worker holds
// the pass is over (end). Redis down: every lease counts as held and the claim alone decides.
func (l *lane) lease(ctx context.Context, ws []*work, end func(*work, result)) []*work {
	d := l.d
	keys := make([]leaseKey, len(ws))
	spans := make([]trace.Span, len(ws))
	for i, w := range ws {
		keys[i] = w.leaseKey()
		_, spans[i] = tracer.Start(w.ctx, "dispatch.lease", trace.WithAttributes(attribute.Int("herald.attempt", keys[i].attempt)))
	}
	held, skipped := d.leases.acquireMany(ctx, keys, d.token, l.leaseTTL(), d.redisTimeout)
	leased := make([]*work, 0, len(ws))
	for i, w := range ws {
		spans[i].SetAttributes(attribute.Bool("herald.lease.held", held[i]), attribute.Bool("herald.degraded", skipped))
		spans[i].End()
		if !held[i] { // another worker is on this attempt
			end(w, resDone)
			continue
		}
		w.leased = !skipped
		leased = append(leased, w)
	}
	return leased
}

// release gives up the record's lease, if it holds one, as soon as its attempt is over (its
// outcome committed), and before a failed pass is retried: a record of the same attempt (one
// a rate-limit deferral handed back and the sweeper published again) must not find the lease
// taken and be dropped as another worker's. That is releaseMany's token-checked release; the
// lease of an attempt whose claim took the row, which no record can claim again, is dropped
// with others in one DEL (leases.drop) without waiting.
func (l *lane) release(w *work) {
	if !w.leased {
		return
	}
	w.leased = false
	if w.claimed.Attempt > 0 && !w.handedBack { // the claim used the attempt up
		l.d.leases.drop(w.leaseKey(), l.d.redisTimeout)
		return
	}
	l.d.leases.releaseMany(context.WithoutCancel(w.ctx), []leaseKey{w.leaseKey()}, l.d.token, l.d.redisTimeout)
}

// leaseKey is the lease of the attempt w is to make: the one after its row's read or, before
// a read (claimFirst), the one after its record's.
func (w *work) leaseKey() leaseKey {
	if w.r == nil {
		return leaseKey{id: w.id, attempt: w.msg.Attempts + 1}
	}
	return leaseKey{id: w.r.ID, attempt: w.r.Attempts + 1}
}

// attempt makes the attempt of a leased record: claimed says whether the batch's claim took
// its row. A row a batch of many did not claim was most often held locked for a moment by
// another transaction (the relay marking it QUEUED), which such a batch skips: it is claimed
// again as a batch of one, which waits for the lock, under the lease still held. A claim lost
// even then reads the row again.
func (l *lane) attempt(ctx context.Context, w *work, cl delivery.Claimed, claimed, many bool) result {
	defer l.release(w)
	if !claimed && many {
		c, err := l.claim(ctx, l.d.pool, []delivery.Seen{{ID: w.r.ID, Attempts: w.r.Attempts}})
		if err != nil {
			w.err = err
			return resFailed
		}
		cl, claimed = c[w.r.ID]
	}
	if !claimed {
		return resAgain
	}
	return l.sendClaimed(w, cl)
}

// sendClaimed makes the attempt cl that w's claim took.
func (l *lane) sendClaimed(w *work, cl delivery.Claimed) result {
	w.claimed = cl
	if err := l.send(w); err != nil {
		w.err = err
		return resFailed
	}
	return resDone
}

// claim is the lane's claim of seen: prompt (its commit not waiting for its WAL flush) when
// the lane's policy retries an ambiguous outcome, since a claim lost with a crash of the
// database then costs what a crash during the provider call costs (delivery.ClaimBatchPrompt).
func (l *lane) claim(ctx context.Context, db delivery.DB, seen []delivery.Seen) (map[string]delivery.Claimed, error) {
	if *l.cfg.RetryAmbiguous {
		return delivery.ClaimBatchPrompt(ctx, db, seen)
	}
	return delivery.ClaimBatch(ctx, db, seen)
}
