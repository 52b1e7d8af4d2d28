package cdc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// sweepSQL finds the PENDING rows that are due now but that the stream did not, or will not,
// publish:
//
//   - next_attempt_at > updated_at: the row was not due when it was written (a retry with
//     back-off, a scheduled send, a quiet-hours deferral). The passing of time writes no WAL,
//     so only a scan can see it become due.
//   - updated_at older than the grace period: the row was due when written, but it is still
//     PENDING long after the stream should have published it and Kafka acknowledged it (the
//     slot was recreated, the relay was down, marking it QUEUED failed).
//
// Walking delivery_pending_due (partial on status = 'PENDING', ordered by next_attempt_at)
// keeps the scan to PENDING rows that are due, oldest first, however large the table grows.
const sweepSQL = `
SELECT id::text, notification_id::text, channel, priority, attempts, next_attempt_at, updated_at,
       coalesce(traceparent, ''), next_attempt_at > updated_at
  FROM delivery
 WHERE status = 'PENDING'
   AND next_attempt_at <= now()
   AND (next_attempt_at > updated_at OR updated_at < now() - make_interval(secs => $1))
 ORDER BY next_attempt_at
 LIMIT $2`

// Reasons the sweeper publishes a row, as the metric attribute herald.reason.
const (
	reasonDue    = "due"
	reasonMissed = "missed"
)

// sweeper publishes rows that became due after they were written and rows the stream missed,
// through the same producer, and marks them QUEUED the same way.
type sweeper struct {
	cfg     Config
	pool    *pgxpool.Pool
	pub     *publisher
	marker  *marker
	metrics *metrics
	log     *zap.Logger
}

func newSweeper(cfg Config, pool *pgxpool.Pool, pub *publisher, mk *marker, m *metrics, log *zap.Logger) *sweeper {
	return &sweeper{cfg: cfg, pool: pool, pub: pub, marker: mk, metrics: m, log: log.With(zap.String("part", "sweeper"))}
}

func (s *sweeper) run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		n, err := s.sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("sweep failed", zap.Error(err))
		}
		if err == nil && n == s.cfg.SweepBatch {
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sweep runs one pass: select a batch, publish it, wait for Kafka, mark what Kafka
// acknowledged QUEUED. Marking before the next pass keeps the next pass from selecting the
// same rows again. It returns the number of rows selected.
func (s *sweeper) sweep(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, sweepSQL, s.cfg.GracePeriod.Seconds(), s.cfg.SweepBatch)
	if err != nil {
		return 0, fmt.Errorf("select due rows: %w", err)
	}
	var batch []deliveryRow
	var becameDue []bool
	for rows.Next() {
		var r deliveryRow
		var late bool
		r.Status = herald.StatusPending
		if err := rows.Scan(&r.ID, &r.NotificationID, &r.Channel, &r.Priority, &r.Attempts,
			&r.NextAttemptAt, &r.UpdatedAt, &r.Traceparent, &late); err != nil {
			rows.Close()
			return 0, fmt.Errorf("scan due row: %w", err)
		}
		batch = append(batch, r)
		becameDue = append(becameDue, late)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("select due rows: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}

	// Callbacks never block: the channel has room for every record of the batch.
	type result struct {
		row deliveryRow
		err error
	}
	results := make(chan result, len(batch))
	due, missed := 0, 0
	for i, r := range batch {
		if becameDue[i] {
			due++
		} else {
			missed++
		}
		s.pub.publish(r, origin{source: sourceSweeper}, func(err error) { results <- result{r, err} })
	}
	var acked []deliveryRow
	var lastErr error
	for range batch {
		select {
		case <-ctx.Done():
			// Unacknowledged rows stay PENDING: the next pass or the next leader has them.
			return 0, ctx.Err()
		case res := <-results:
			if res.err != nil {
				lastErr = res.err
			} else {
				acked = append(acked, res.row)
			}
		}
	}
	if missed > 0 {
		s.log.Info("published rows the stream missed", zap.Int("rows", missed))
	}
	s.metrics.sweptRows(ctx, reasonDue, due)
	s.metrics.sweptRows(ctx, reasonMissed, missed)
	for len(acked) > 0 {
		n := min(len(acked), s.cfg.MarkBatch)
		if _, err := s.marker.mark(ctx, acked[:n]); err != nil { // rows read from the table: visible
			return 0, err
		}
		acked = acked[n:]
	}
	if lastErr != nil {
		return 0, lastErr
	}
	return len(batch), nil
}
