package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/sleep"
	"github.com/heraldhq/herald/senders"
)

// The path: every record, alone or with the others of its poll, goes
//
//	read (one query) → decide → lease (one Redis pipeline) → claim (one statement) →
//	rate limit → provider call → outcome (the lane's group commit)
//
// A single record is a batch of one. A record whose pass ends without settling it (the row
// changed underneath, the read was older than the record, the database failed) takes another
// pass as a batch of its own (retry). Tracing and the lag metric attach when a record enters
// and leaves the path (hooks.go), the provider metrics and the send span around the sender
// (sender_metrics.go, traced.go); the stages themselves hold neither.

// maxClaimBatch bounds how many records one batch reads, leases and claims together.
const maxClaimBatch = 64

// batchItem is one polled record of a batch, or one handed over in process (Dispatcher.Hand).
type batchItem struct {
	rec *kgo.Record
	tr  *tracked // the record's offset; nil for a handed record
}

// work is one record on its way through the path, across the passes it takes.
type work struct {
	it  batchItem
	msg herald.DeliveryMessage
	id  string          // the delivery id in canonical form, as the database returns it
	ctx context.Context // the record's context: its trace (begin)

	passState // set afresh by each pass

	// Across passes.
	passes     int           // passes that found the row changed underneath
	tries      int           // passes that failed
	backoff    time.Duration // before the next try after a failure
	staleUntil time.Time     // until then, a read older than the record is waited out
	staleWait  time.Duration // before the next read after a stale one
}

// passState is what one pass learns of a record.
type passState struct {
	r        *row
	route    route            // who sends the attempt, under which rate-limit account
	m        *senders.Message // the attempt's message
	buildErr error            // why the attempt cannot be sent: it ends without a provider call
	claimed  delivery.Claimed
	// handedBack: the claim was given back unused (a rate-limit deferral, Unclaim), so the
	// attempt's number will be claimed again and its lease must be released, not dropped.
	handedBack bool
	leased     bool  // the attempt's Redis lease is this worker's (false: Redis down, none taken)
	err        error // why the pass failed
}

// result is how one pass ended for one record.
type result int

const (
	resDone   result = iota // settled: nothing more to do for the record
	resAgain                // the row changed between the read and a write: read it again
	resStale                // the read saw a version older than the record: read again shortly
	resFailed               // w.err: the database could not be reached or a statement failed
)

// runBatch takes the records polled together through the path, and each record that needs
// another pass through it again (retry). finish is called once per item, as soon as it is
// settled; settled=false (the lane's shutdown deadline cut it off) leaves its offset
// uncommitted. A batch is whatever the poll returned and the lane has room for: nothing waits
// for one to fill.
func (l *lane) runBatch(ctx context.Context, items []batchItem, finish func(batchItem, bool)) {
	var wg sync.WaitGroup
	var end func(*work, result)
	end = func(w *work, res result) {
		wait, again := l.retry(ctx, w, res)
		if !again {
			l.end(w)
			finish(w.it, ctx.Err() == nil)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleep.For(ctx, wait) != nil {
				end(w, resDone)
				return
			}
			l.pass(ctx, []*work{w}, end)
		}()
	}
	batch, alone := l.admit(ctx, items, finish)
	for _, w := range alone {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.pass(ctx, []*work{w}, end)
		}()
	}
	l.pass(ctx, batch, end)
	wg.Wait()
}

// admit decodes the polled records and starts each on the path (begin). A second record of a
// delivery already in the batch goes in a batch of its own, beside it (it finds the attempt's
// lease taken, or the row moved on). A record that names no delivery is settled at once.
func (l *lane) admit(ctx context.Context, items []batchItem, finish func(batchItem, bool)) (batch, alone []*work) {
	taken := make(map[string]bool, len(items))
	for _, it := range items {
		msg, err := herald.UnmarshalDeliveryMessage(it.rec.Value)
		var id uuid.UUID
		if err == nil {
			id, err = uuid.Parse(msg.DeliveryID)
		}
		if err != nil {
			l.log.Error("skip undecodable record", zap.String("topic", it.rec.Topic),
				zap.Int32("partition", it.rec.Partition), zap.Int64("offset", it.rec.Offset), zap.Error(err))
			finish(it, ctx.Err() == nil)
			continue
		}
		w := &work{it: it, msg: msg, id: id.String(), staleUntil: time.Now().Add(staleReadWait)}
		l.begin(ctx, w)
		if taken[w.id] {
			alone = append(alone, w)
			continue
		}
		taken[w.id] = true
		batch = append(batch, w)
	}
	return batch, alone
}

// pass takes ws through one round of the path: it reads their rows in one query, decides
// each (decide), settles those that need no provider call (settle), and leases, claims and
// sends the others. end is called for each record as soon as its pass is over; pass returns
// once it was called for all.
func (l *lane) pass(ctx context.Context, ws []*work, end func(*work, result)) {
	if len(ws) == 0 {
		return
	}
	if len(ws) == 1 && claimsFirst(ws[0]) {
		l.claimFirst(ctx, ws[0], end)
		return
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.id
	}
	rows, err := loadMany(ctx, l.d.pool, ids)
	var send []*work
	for _, w := range ws {
		trace.SpanFromContext(w.ctx).AddEvent(eventRowsRead)
		w.passState = passState{r: rows[w.id], err: err}
		if err != nil {
			end(w, resFailed)
			continue
		}
		v, reason := l.decide(w.r, w.msg, time.Now().Before(w.staleUntil))
		if v != verdictSend {
			end(w, l.settle(w, v, reason))
			continue
		}
		l.prepare(w)
		send = append(send, w)
	}
	l.leaseClaimSend(ctx, send, end)
}

// A claim can lose to a change made between read and claim (a racing worker, expiry during
// a rate-limit wait); reading again settles what happened, up to maxPasses reads.
const maxPasses = 3

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

// retry is the backoff around the path: whether a record whose pass ended with res takes
// another pass, and after how long. While the database is unreachable a record is retried
// (backing off up to 5 s) for as long as the lane runs; any other failure is retried a few
// times, then logged and the record let go: its row stays PENDING, QUEUED or SENDING, which
// the reaper and sweeper bring back.
func (l *lane) retry(ctx context.Context, w *work, res result) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false // cut off: whatever it did, its row is the truth
	}
	switch res {
	case resAgain:
		w.passes++
		w.staleUntil, w.staleWait = time.Now().Add(staleReadWait), 0
		return 0, w.passes < maxPasses
	case resStale:
		l.signal(signalStaleRead)
		w.staleWait = max(2*w.staleWait, staleReadFirst)
		return min(w.staleWait, time.Until(w.staleUntil)), true
	case resFailed:
		return l.failed(w)
	}
	return 0, false
}

// failed is retry for a pass that failed with w.err.
func (l *lane) failed(w *work) (time.Duration, bool) {
	w.tries++
	w.passes, w.staleUntil, w.staleWait = 0, time.Now().Add(staleReadWait), 0
	recordError(w)
	if w.tries >= 5 && !unreachable(w.err) {
		l.log.Error("give up on record; the sweeper will republish its row", zap.String("topic", w.it.rec.Topic),
			zap.Int32("partition", w.it.rec.Partition), zap.Int64("offset", w.it.rec.Offset), zap.Error(w.err))
		return 0, false
	}
	l.log.Warn("process record", zap.Int("try", w.tries), zap.Error(w.err))
	wait := max(w.backoff, 100*time.Millisecond)
	w.backoff = min(2*wait, 5*time.Second)
	return wait, true
}
