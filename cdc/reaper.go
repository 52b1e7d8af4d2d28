package cdc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// reaper brings back rows stuck in a non-terminal state: QUEUED past the priority's QUEUED
// lease or the lane's watermark (the record was lost or consumed without effect; see
// delivery.ReapQueued), SENDING past the SENDING lease (the worker died mid-call; see
// delivery.ReapSending). See docs/cdc.md for how the leases are chosen.
type reaper struct {
	cfg      Config
	pool     *pgxpool.Pool
	progress *laneProgress
	metrics  *metrics
	log      *zap.Logger
	// passHook, when set (tests of this package), is called after every pass.
	passHook func()
}

func newReaper(cfg Config, pool *pgxpool.Pool, progress *laneProgress, m *metrics, log *zap.Logger) *reaper {
	return &reaper{cfg: cfg, pool: pool, progress: progress, metrics: m, log: log.With(zap.String("part", "reaper"))}
}

func (r *reaper) run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.ReapInterval)
	defer t.Stop()
	for {
		if err := r.reap(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reap failed", zap.Error(err))
		}
		if r.passHook != nil {
			r.passHook()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// movingLeaseFactor stretches the QUEUED lease of a lane whose consumer group is moving.
const movingLeaseFactor = 10

func (r *reaper) reap(ctx context.Context) error {
	var dbNow time.Time
	if err := r.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		return fmt.Errorf("read database time: %w", err)
	}
	for _, p := range herald.Priorities {
		var watermark *time.Time
		kctx, cancel := context.WithTimeout(ctx, r.cfg.ReapInterval)
		w, err := r.progress.watermark(kctx, p, dbNow, r.cfg.QueuedLease[p])
		cancel()
		if err != nil && ctx.Err() == nil {
			// Only the lease applies until Kafka answers again.
			r.log.Debug("no lane watermark", zap.String("priority", string(p)), zap.Error(err))
		}
		if !w.IsZero() {
			watermark = &w
		}
		// While the lane's group commits progress, its QUEUED rows are waiting their turn
		// behind a backlog: the lease would only re-publish live rows in a loop. Progress is
		// seen per lane, not per partition, so one stalled partition of a moving lane would
		// keep its rows QUEUED for as long as the stall lasts: the lease is then stretched,
		// not lifted.
		lease := r.cfg.QueuedLease[p]
		if r.progress.moving(p, dbNow, r.cfg.QueuedLease[p]) {
			lease *= movingLeaseFactor
		}
		n, err := delivery.ReapQueued(ctx, r.pool, p, lease, r.cfg.ReapBatch, watermark)
		if err != nil {
			return err
		}
		if n > 0 {
			r.metrics.reapedRows(ctx, herald.StatusQueued, p, n)
			r.log.Warn("returned QUEUED rows whose record was consumed or lost, or past their lease, to PENDING",
				zap.String("priority", string(p)), zap.Int64("rows", n))
		}
	}
	reaped, err := delivery.ReapSending(ctx, r.pool, r.cfg.SendingLease, r.cfg.ReapBatch)
	if err != nil {
		return err
	}
	for _, p := range herald.Priorities {
		if n := reaped[p]; n > 0 {
			r.metrics.reapedRows(ctx, herald.StatusSending, p, n)
			r.log.Warn("returned SENDING rows past their lease to PENDING; attempts logged AMBIGUOUS",
				zap.String("priority", string(p)), zap.Int64("rows", n))
		}
	}
	return nil
}
