package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/senders"
)

// maxClaimBatch bounds how many records one batch reads, leases and claims together.
const maxClaimBatch = 64

// batchItem is one polled record of a batch.
type batchItem struct {
	rec *kgo.Record
	tr  *tracked
}

// candidate is a record whose row is due and ready to send: the batch leases and claims it.
type candidate struct {
	it     batchItem
	msg    herald.DeliveryMessage
	id     string // canonical form, as the database returns it
	r      *row
	m      *senders.Message
	sender Sender
	ctx    context.Context
	span   trace.Span
}

// runBatch processes the records polled together, with one round trip each for the read
// (loadMany), the leases (acquireMany) and the claim (delivery.ClaimBatch) of the whole
// batch; each claimed delivery then goes through the rate limiter and its provider call on
// its own, and its outcome through the lane's group commit. A batch is whatever the poll
// returned and the lane has room for: nothing waits for one to fill. Every record that is not
// plainly a due delivery ready to send — a row not visible yet or older than its record, an
// expired one, one out of attempts, one that cannot be built, one that another transaction
// holds, a duplicate in the batch, or any error — goes the per-record way (handle), which
// re-reads the row and settles it exactly as before. finish is called once per item, as soon
// as it is settled; settled=false leaves its offset uncommitted.
func (l *lane) runBatch(ctx context.Context, items []batchItem, finish func(batchItem, bool)) {
	d := l.d
	var wg sync.WaitGroup
	alone := func(it batchItem) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			finish(it, l.handle(ctx, it.rec))
		}()
	}
	defer wg.Wait()

	var cands []*candidate
	var ids []string
	taken := make(map[string]bool, len(items))
	for _, it := range items {
		msg, err := herald.UnmarshalDeliveryMessage(it.rec.Value)
		u, uerr := uuid.Parse(msg.DeliveryID)
		if err != nil || uerr != nil || taken[u.String()] {
			alone(it)
			continue
		}
		taken[u.String()] = true
		cands = append(cands, &candidate{it: it, msg: msg, id: u.String()})
		ids = append(ids, u.String())
	}
	if len(cands) == 0 {
		return
	}
	rows, err := loadMany(ctx, d.pool, ids)
	if err != nil {
		for _, c := range cands {
			alone(c.it)
		}
		return
	}
	var ready []*candidate
	for _, c := range cands {
		if r := rows[c.id]; r != nil && l.prepare(ctx, c, r) {
			ready = append(ready, c)
			continue
		}
		if r := rows[c.id]; r != nil && !stale(r, c.msg) && (r.Status.Terminal() || r.Status == herald.StatusSending ||
			(!r.Expired && !r.Due)) {
			// Finished, in flight elsewhere, or not due (the sweeper publishes it when due).
			d.metrics.lag.Record(ctx, time.Since(c.it.rec.Timestamp).Seconds(), l.attrs)
			finish(c.it, ctx.Err() == nil)
			continue
		}
		alone(c.it)
	}
	if len(ready) == 0 {
		return
	}
	l.claimAndSend(ctx, ready, finish, alone)
}

// stale reports whether r is a version from before the one msg was made from (see attempt).
func stale(r *row, msg herald.DeliveryMessage) bool {
	return r.Attempts < msg.Attempts || (r.Status == herald.StatusSending && r.Attempts == msg.Attempts)
}

// prepare reports whether r is a delivery the batch can claim and send as it is, and if so
// builds its message and starts its trace.
func (l *lane) prepare(ctx context.Context, c *candidate, r *row) bool {
	d := l.d
	if stale(r, c.msg) || r.Status.Terminal() || r.Status == herald.StatusSending || r.Expired || !r.Due ||
		l.noMoreAttempts(r) != "" {
		return false
	}
	sender := d.senders[r.Channel]
	if sender == nil {
		return false
	}
	m, err := r.message(ctx, d.cfg.Renderer, r.Attempts+1)
	if err != nil {
		return false
	}
	c.r, c.m, c.sender = r, m, sender
	c.ctx = propagation.TraceContext{}.Extract(ctx, headerCarrier(c.it.rec.Headers))
	c.ctx, c.span = tracer.Start(c.ctx, "dispatch.deliver", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("herald.delivery_id", c.msg.DeliveryID),
			attribute.String("herald.priority", string(l.prio)),
			attribute.String("messaging.destination.name", c.it.rec.Topic),
			attribute.Int("herald.attempt", r.Attempts+1), attribute.String("herald.channel", string(r.Channel))))
	d.metrics.lag.Record(c.ctx, time.Since(c.it.rec.Timestamp).Seconds(), l.attrs)
	return true
}

// claimAndSend leases and claims the ready deliveries of a batch and sends each one claimed.
func (l *lane) claimAndSend(ctx context.Context, ready []*candidate, finish func(batchItem, bool), alone func(batchItem)) {
	d := l.d
	leaseTTL := d.cfg.SendTimeout + max(l.cfg.RateWait, 0) + 10*time.Second
	keys := make([]leaseKey, len(ready))
	lspans := make([]trace.Span, len(ready))
	for i, c := range ready {
		keys[i] = leaseKey{id: c.r.ID, attempt: c.r.Attempts + 1}
		_, lspans[i] = tracer.Start(c.ctx, "dispatch.lease", trace.WithAttributes(attribute.Int("herald.attempt", c.r.Attempts+1)))
	}
	held, skipped := d.leases.acquireMany(ctx, keys, d.token, leaseTTL, d.redisTimeout)
	var leased []*candidate
	var seen []delivery.Seen
	for i, c := range ready {
		lspans[i].SetAttributes(attribute.Bool("herald.lease.held", held[i]), attribute.Bool("herald.degraded", skipped))
		lspans[i].End()
		if !held[i] { // another worker is on this attempt
			c.span.End()
			finish(c.it, ctx.Err() == nil)
			continue
		}
		leased = append(leased, c)
		seen = append(seen, delivery.Seen{ID: c.r.ID, Attempts: c.r.Attempts})
	}
	if len(leased) == 0 {
		return
	}
	release := func(cs []*candidate) {
		if skipped || len(cs) == 0 {
			return
		}
		ks := make([]leaseKey, len(cs))
		for i, c := range cs {
			ks[i] = leaseKey{id: c.r.ID, attempt: c.r.Attempts + 1}
		}
		d.leases.releaseMany(context.WithoutCancel(ctx), ks, d.token, d.redisTimeout)
	}
	claimed, err := claimAll(ctx, d, seen)
	if err != nil {
		claimed = nil // every one goes the per-record way, which retries
	}
	var lost []*candidate
	var sends sync.WaitGroup
	// send makes one claimed attempt and releases its lease as soon as the attempt is over,
	// as the per-record path does: not when the batch's slowest send ends, since a record of
	// the same attempt (one a rate-limit deferral handed back and the sweeper published again)
	// would find the lease taken and be dropped as another worker's; and before a failed pass
	// is retried by handle, which takes the lease again.
	send := func(c *candidate, cl delivery.Claimed) {
		c.m.Attempt = cl.Attempt
		err := l.send(c.ctx, c.r, c.m, c.sender, cl.Attempt, cl.StartedAt)
		release([]*candidate{c})
		if err != nil {
			c.span.RecordError(err)
			c.span.SetStatus(codes.Error, "dispatch failed")
		}
		c.span.End()
		if err != nil && ctx.Err() == nil {
			finish(c.it, l.handle(ctx, c.it.rec)) // as handle retries a failed pass
			return
		}
		finish(c.it, ctx.Err() == nil)
	}
	for _, c := range leased {
		if cl, ok := claimed[c.r.ID]; ok {
			sends.Add(1)
			go func() {
				defer sends.Done()
				send(c, cl)
			}()
			continue
		}
		if err != nil {
			lost = append(lost, c)
			continue
		}
		// Not claimed: most often another transaction held the row locked for a moment (the
		// relay marking it QUEUED), which the batch skipped. The single-row claim waits for the
		// lock and compares the same attempt count, with the lease still held; only a claim
		// it loses goes the per-record way.
		sends.Add(1)
		go func() {
			defer sends.Done()
			att, started, ok, cerr := delivery.Claim(ctx, d.pool, c.r.ID, c.r.Attempts)
			if cerr != nil || !ok {
				release([]*candidate{c})
				c.span.End()
				alone(c.it)
				return
			}
			send(c, delivery.Claimed{Attempt: att, StartedAt: started})
		}()
	}
	// The batch claim failed: the leases go back first, then the per-record way reads each
	// row again and settles what happened.
	release(lost)
	for _, c := range lost {
		c.span.End()
		alone(c.it)
	}
	sends.Wait()
}

// claimAll claims seen with delivery.ClaimBatch; a batch of one (a HIGH record, a lane that is
// not busy) with delivery.Claim, the simpler statement, which waits for a row lock instead of
// skipping the row.
func claimAll(ctx context.Context, d *Dispatcher, seen []delivery.Seen) (map[string]delivery.Claimed, error) {
	if len(seen) != 1 {
		return delivery.ClaimBatch(ctx, d.pool, seen)
	}
	att, started, ok, err := delivery.Claim(ctx, d.pool, seen[0].ID, seen[0].Attempts)
	if err != nil || !ok {
		return map[string]delivery.Claimed{}, err
	}
	return map[string]delivery.Claimed{seen[0].ID: {Attempt: att, StartedAt: started}}, nil
}
