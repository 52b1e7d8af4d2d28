package dispatch

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/delivery"
)

// Outcomes are written in group commits: a lane's workers hand their outcomes to a few
// writers, and each writer takes whatever outcomes are waiting (up to maxRecordBatch) and
// writes them with one statement and one commit (delivery.RecordBatch). A writer never waits
// for a batch to fill: when it is free it writes what is there, so an outcome waits at most
// for the write in progress, and alone on an idle lane it is written at once. Under load,
// outcomes pile up while a write runs and the next write takes them all: fewer commits per
// delivery, the busier the lane. A worker waits for its own outcome to be written before its
// record counts as done, so a crash loses no outcome that a committed offset relies on.
const (
	maxRecordBatch = 128
	recordWriters  = 2
)

// outcomeWrite is one outcome waiting for a writer.
type outcomeWrite struct {
	rec  delivery.Recording
	done chan outcomeResult // buffered: the writer never blocks on it
}

type outcomeResult struct {
	ok  bool
	err error
}

// outcomeWriter is one lane's group-commit writer pool.
type outcomeWriter struct {
	pool  *pgxpool.Pool
	log   *zap.Logger
	queue chan *outcomeWrite
	wg    sync.WaitGroup
}

func newOutcomeWriter(pool *pgxpool.Pool, log *zap.Logger) *outcomeWriter {
	return &outcomeWriter{pool: pool, log: log}
}

// start runs the writers until stop. Every write runs on a context detached from the lane's,
// bounded by dbWriteTimeout: an outcome, once the provider was called, must be kept.
func (r *outcomeWriter) start() {
	r.queue = make(chan *outcomeWrite, maxRecordBatch)
	for range recordWriters {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.write()
		}()
	}
}

// stop ends the writers once every outcome handed over has been written; no record may be
// called after it.
func (r *outcomeWriter) stop() {
	close(r.queue)
	r.wg.Wait()
}

// record hands o over and waits for its write: ok=false when the row was no longer this
// attempt's, an error when the write failed (the caller decides whether to try again).
func (r *outcomeWriter) record(rec delivery.Recording) (bool, error) {
	w := &outcomeWrite{rec: rec, done: make(chan outcomeResult, 1)}
	r.queue <- w
	res := <-w.done
	return res.ok, res.err
}

func (r *outcomeWriter) write() {
	batch := make([]*outcomeWrite, 0, maxRecordBatch)
	for first := range r.queue {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxRecordBatch {
			select {
			case w, open := <-r.queue:
				if !open {
					break fill
				}
				batch = append(batch, w)
			default:
				break fill
			}
		}
		r.flush(batch)
	}
}

// flush writes a batch, one outcome or many, in one statement. When that fails for a reason
// other than an unreachable database (a lock timeout on one row, say), each outcome is written
// on its own, so that one row cannot cost the others their outcome.
func (r *outcomeWriter) flush(batch []*outcomeWrite) {
	recorded, err := r.write1(batch)
	if err != nil && len(batch) > 1 && !unreachable(err) {
		for _, w := range batch {
			r.flush([]*outcomeWrite{w})
		}
		return
	}
	for _, w := range batch {
		_, ok := recorded[w.rec.ID]
		w.done <- outcomeResult{ok: ok, err: err}
	}
	r.applyHeldReceipts(batch, recorded)
}

// write1 writes the outcomes of batch with one delivery.RecordBatch.
func (r *outcomeWriter) write1(batch []*outcomeWrite) (map[string]struct{}, error) {
	recs := make([]delivery.Recording, len(batch))
	for i, w := range batch {
		recs[i] = w.rec
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbWriteTimeout)
	defer cancel()
	return delivery.RecordBatch(ctx, r.pool, recs)
}
