package cdc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// reapQueuedSQL returns QUEUED rows of one priority to PENDING when they were marked QUEUED
// before the lane's watermark ($4, see laneProgress; NULL when unknown) — their record has
// been consumed or lost and the row did not move — or when their lease ($2 seconds,
// stretched while the lane is moving) is over. The row
// keeps its (past) next_attempt_at, so the new version is due at write time and the stream
// publishes it again: the reaper itself never talks to Kafka.
//
// The inner SELECT walks delivery_in_flight (partial on QUEUED/SENDING, by updated_at) and
// skips rows a worker is claiming right now; the outer UPDATE is the compare-and-set: a row
// claimed or rewritten since the SELECT no longer matches its updated_at and is left alone.
const reapQueuedSQL = `
WITH stale AS (
    SELECT id, updated_at
      FROM delivery
     WHERE status = 'QUEUED' AND priority = $1
       AND updated_at < greatest(coalesce(now() - make_interval(secs => $2), '-infinity'::timestamptz),
                                 coalesce($4::timestamptz, '-infinity'::timestamptz))
     ORDER BY updated_at
     LIMIT $3
       FOR UPDATE SKIP LOCKED)
UPDATE delivery AS d
   SET status = 'PENDING'
  FROM stale
 WHERE d.id = stale.id AND d.status = 'QUEUED' AND d.updated_at = stale.updated_at`

// reapSendingSQL returns SENDING rows whose lease is over to PENDING, due now, and logs the
// attempt that was in flight as AMBIGUOUS: the worker may have died before or after the
// provider accepted the message. The attempt number is the row's attempts (the worker's
// claim incremented it); ON CONFLICT DO NOTHING keeps an outcome the worker did manage to
// write. What to do with an ambiguous attempt is dispatch's policy, applied when it claims
// the row again.
const reapSendingSQL = `
WITH stale AS (
    SELECT id, attempts, updated_at
      FROM delivery
     WHERE status = 'SENDING'
       AND updated_at < now() - make_interval(secs => $1)
     ORDER BY updated_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED),
reaped AS (
    UPDATE delivery AS d
       SET status = 'PENDING', next_attempt_at = now()
      FROM stale
     WHERE d.id = stale.id AND d.status = 'SENDING'
       AND d.attempts = stale.attempts AND d.updated_at = stale.updated_at
 RETURNING d.id, d.attempts, d.priority, stale.updated_at AS claimed_at),
logged AS (
    INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome, error)
    SELECT id, attempts, claimed_at, 'AMBIGUOUS', 'in flight past the SENDING lease; outcome unknown'
      FROM reaped
     WHERE attempts > 0
        ON CONFLICT DO NOTHING)
SELECT priority, count(*) FROM reaped GROUP BY priority`

// reaper brings back rows stuck in a non-terminal state: QUEUED past the priority's QUEUED
// lease (the record was lost or never consumed), SENDING past the SENDING lease (the worker
// died mid-call). See docs/cdc.md for how the leases are chosen.
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
		leaseSeconds := r.cfg.QueuedLease[p].Seconds()
		if r.progress.moving(p, dbNow, r.cfg.QueuedLease[p]) {
			leaseSeconds *= movingLeaseFactor
		}
		tag, err := r.pool.Exec(ctx, reapQueuedSQL, string(p), leaseSeconds, r.cfg.ReapBatch, watermark)
		if err != nil {
			return fmt.Errorf("reap QUEUED %s rows: %w", p, err)
		}
		if n := tag.RowsAffected(); n > 0 {
			r.metrics.reapedRows(ctx, herald.StatusQueued, p, n)
			r.log.Warn("returned QUEUED rows whose record was consumed or lost, or past their lease, to PENDING",
				zap.String("priority", string(p)), zap.Int64("rows", n))
		}
	}
	rows, err := r.pool.Query(ctx, reapSendingSQL, r.cfg.SendingLease.Seconds(), r.cfg.ReapBatch)
	if err != nil {
		return fmt.Errorf("reap SENDING rows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p herald.Priority
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			return fmt.Errorf("reap SENDING rows: %w", err)
		}
		r.metrics.reapedRows(ctx, herald.StatusSending, p, n)
		r.log.Warn("returned SENDING rows past their lease to PENDING; attempts logged AMBIGUOUS",
			zap.String("priority", string(p)), zap.Int64("rows", n))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reap SENDING rows: %w", err)
	}
	return nil
}
