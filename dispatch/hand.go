package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
)

// Hand takes the record of a HIGH delivery that this process accepted a moment ago straight
// to its HIGH lane, without Kafka: the way an OTP pool (ingest and the HIGH lane in one
// process) skips the produce, the broker and the fetch of its own records (docs/architecture.md,
// "Handed over in process"). rec is the record the accepting process would publish (its
// value, its traceparent header); the lane takes it through the path like a polled one, and
// has no offset to commit for it. false: this process runs no HIGH lane, the lane is not
// taking records (not started, or stopping), or none of its worker slots is free; the caller
// then publishes the record. Either way the relay's record from the WAL stays the guarantee,
// and whichever record comes second finds the attempt's lease taken or the row sent.
func (d *Dispatcher) Hand(rec *kgo.Record) bool {
	l := d.lanes[herald.PriorityHigh]
	if l == nil {
		return false
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = time.Now() // the lane lag's start, as a producer's timestamp is
	}
	return l.hand.take(rec)
}

// handoff is a lane's door for handed records: open while the lane runs and polls, with the
// lane's worker slots and its context of work.
type handoff struct {
	mu     sync.Mutex
	w      *workers // nil: closed
	ctx    context.Context
	finish func(batchItem, bool)
	run    func(ctx context.Context, items []batchItem, finish func(batchItem, bool))
}

// open lets handed records in, into w's slots, run by run under ctx.
func (h *handoff) open(ctx context.Context, w *workers, run func(context.Context, []batchItem, func(batchItem, bool)),
	finish func(batchItem, bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ctx, h.w, h.run, h.finish = ctx, w, run, finish
}

// close lets no more records in; once it returns, every record it let in is counted in the
// workers' wait group, which the lane's drain waits for.
func (h *handoff) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.w = nil
}

// take starts rec on the path in a free worker slot, if the door is open and a slot is free.
func (h *handoff) take(rec *kgo.Record) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		return false
	}
	select {
	case h.w.sem <- struct{}{}:
	default:
		return false
	}
	h.w.wg.Add(1)
	w, ctx, run, finish := h.w, h.ctx, h.run, h.finish
	go func() {
		defer w.wg.Done()
		run(ctx, []batchItem{{rec: rec}}, finish)
	}()
	return true
}
