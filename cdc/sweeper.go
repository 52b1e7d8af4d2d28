package cdc

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// Reasons the sweeper publishes a row, as the metric attribute herald.reason.
const (
	reasonDue    = "due"
	reasonMissed = "missed"
)

// sweeper publishes rows that became due after they were written and rows the stream missed
// (delivery.Due: highest priority first), through the same producer, and marks them QUEUED
// the same way. Each pass first ends PENDING rows past their expiry EXPIRED
// (delivery.ExpireDue), so that a row due after its expiry does not wait to become due.
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
		expired, err := s.expire(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("expire failed", zap.Error(err))
		}
		n, err := s.sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("sweep failed", zap.Error(err))
		}
		if err == nil && (n == s.cfg.SweepBatch || expired == int64(s.cfg.SweepBatch)) {
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// expire ends at most SweepBatch PENDING rows past their expires_at EXPIRED.
func (s *sweeper) expire(ctx context.Context) (int64, error) {
	n, err := delivery.ExpireDue(ctx, s.pool, s.cfg.SweepBatch)
	if n > 0 {
		s.metrics.expiredRows(ctx, n)
		s.log.Info("expired PENDING rows past their expiry", zap.Int64("rows", n))
	}
	return n, err
}

// sweep runs one pass: select a batch, publish it, wait for Kafka, mark what Kafka
// acknowledged QUEUED. Marking before the next pass keeps the next pass from selecting the
// same rows again. It returns the number of rows selected.
func (s *sweeper) sweep(ctx context.Context) (int, error) {
	rows, err := delivery.Due(ctx, s.pool, s.cfg.GracePeriod, s.cfg.SweepBatch)
	if err != nil {
		return 0, err
	}
	batch := make([]deliveryRow, len(rows))
	becameDue := make([]bool, len(rows))
	for i, r := range rows {
		batch[i] = deliveryRow{ID: r.ID, NotificationID: r.NotificationID, Channel: r.Channel, Priority: r.Priority,
			Status: herald.StatusPending, Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt, UpdatedAt: r.UpdatedAt,
			Traceparent: r.Traceparent}
		becameDue[i] = r.BecameDue
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
