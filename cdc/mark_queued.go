package cdc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/delivery"
)

// A compare-and-set that matches nothing usually means the row moved on, but not always: a
// transaction's commit record reaches the WAL (and so the relay, Kafka and this statement)
// a moment before the transaction becomes visible to other sessions. Under load the mark can
// win that race and not see the row yet. Rows that did not match are therefore tried again
// markRetries times, markRetryDelay apart; a row that still does not match has moved on (or
// stays PENDING and the sweeper publishes it again after the grace period).
const (
	markRetries    = 3
	markRetryDelay = 100 * time.Millisecond
)

type markItem struct {
	row   deliveryRow
	tries int
}

// marker batches rows acknowledged by Kafka and marks them QUEUED with delivery.MarkQueued,
// a compare-and-set on the version that was published. add is called from Kafka
// client goroutines and never blocks on the database. Its backlog (rows added and not yet
// marked, dropped or given up) is what the stream bounds with MaxUnmarked: Kafka usually
// acknowledges faster than PostgreSQL marks, most of all on a starved machine, and an
// unbounded backlog grew herald by hundreds of megabytes on a large backlog.
type marker struct {
	pool    *pgxpool.Pool
	batch   int
	gather  time.Duration // how long the first waiting row waits for more (Config.MarkGather)
	log     *zap.Logger
	metrics *metrics

	mu      sync.Mutex
	items   []markItem
	signal  chan struct{} // capacity 1: "items is not empty"
	backlog atomic.Int64  // rows added and not yet settled, retries included
	settled chan struct{} // capacity 1: "the backlog went down"
}

func newMarker(pool *pgxpool.Pool, batch int, gather time.Duration, log *zap.Logger, m *metrics) *marker {
	return &marker{pool: pool, batch: batch, gather: gather, log: log, metrics: m,
		signal: make(chan struct{}, 1), settled: make(chan struct{}, 1)}
}

func (m *marker) add(row deliveryRow) {
	m.backlog.Add(1)
	m.mu.Lock()
	m.items = append(m.items, markItem{row: row})
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// settle takes n rows off the backlog: marked, dropped after an error, or given up.
func (m *marker) settle(n int) {
	if n == 0 {
		return
	}
	m.backlog.Add(-int64(n))
	select {
	case m.settled <- struct{}{}:
	default:
	}
}

// run marks rows until ctx ends, then marks what is left. Statements run with a timeout of
// their own, not with ctx: a term that ends must still mark what Kafka already has.
func (m *marker) run(ctx context.Context) {
	var retry []markItem
	var retryC <-chan time.Time
	for {
		var again []markItem
		select {
		case <-ctx.Done():
			m.flush(ctx, nil)
			return
		case <-m.signal:
			m.wait(ctx)
			again = m.flush(ctx, nil)
		case <-retryC:
			again = m.flush(ctx, retry)
			retry, retryC = nil, nil
		}
		retry = append(retry, again...)
		if len(retry) > 0 && retryC == nil {
			retryC = time.After(markRetryDelay)
		}
	}
}

// wait lets more acknowledged rows join the first one for up to m.gather, until a batch is
// full or ctx ends.
func (m *marker) wait(ctx context.Context) {
	timer := time.NewTimer(m.gather)
	defer timer.Stop()
	for {
		m.mu.Lock()
		full := len(m.items) >= m.batch
		m.mu.Unlock()
		if full {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case <-m.signal:
		}
	}
}

// flush marks the queued items and the given retries, and returns the items to try again.
func (m *marker) flush(ctx context.Context, retry []markItem) []markItem {
	m.mu.Lock()
	items := append(retry, m.items...)
	m.items = nil
	m.mu.Unlock()
	var again []markItem
	for len(items) > 0 {
		n := min(len(items), m.batch)
		batch := items[:n]
		items = items[n:]
		rows := make([]deliveryRow, n)
		for i, it := range batch {
			rows[i] = it.row
		}
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		changed, err := m.mark(mctx, rows)
		cancel()
		if err != nil {
			// The rows stay PENDING; the sweeper publishes them again after the grace
			// period. Kafka already has them, so this only costs a duplicate record.
			m.log.Warn("mark rows queued failed; the sweeper will publish them again",
				zap.Int("rows", n), zap.Error(err))
			m.settle(n)
			continue
		}
		if len(changed) == n {
			m.settle(n)
			continue
		}
		retried := 0
		for _, it := range batch {
			if _, ok := changed[it.row.ID]; !ok && it.tries < markRetries {
				it.tries++
				again = append(again, it)
				retried++
			}
		}
		m.settle(n - retried)
	}
	return again
}

// mark runs the compare-and-set for rows (delivery.MarkQueued) and returns the ids it
// changed.
func (m *marker) mark(ctx context.Context, rows []deliveryRow) (map[string]struct{}, error) {
	vs := make([]delivery.Version, len(rows))
	for i, r := range rows {
		vs[i] = delivery.Version{ID: r.ID, Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt, UpdatedAt: r.UpdatedAt}
	}
	// The statement commits without waiting for its WAL flush (delivery.MarkQueued).
	changed, err := delivery.MarkQueued(ctx, m.pool, vs)
	if err != nil {
		return nil, err
	}
	m.metrics.marked(ctx, int64(len(changed)))
	return changed, nil
}
