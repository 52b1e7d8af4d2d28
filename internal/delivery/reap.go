package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
)

// reapQueuedSQL returns QUEUED rows of one priority to PENDING when they were marked QUEUED
// before the lane's watermark ($4, see cdc's laneProgress; NULL when unknown) — their record
// has been consumed or lost and the row did not move — or when their lease ($2 seconds) is
// over. The row keeps its (past) next_attempt_at, so the new version is due at write time and
// the stream publishes it again: the reaper itself never talks to Kafka.
//
// The inner SELECT walks delivery_queued_by_priority (partial on QUEUED, by priority and
// updated_at) as a range scan of the priority's rows older than the bound, and skips rows a worker is claiming right now; the outer UPDATE is the compare-and-set: a row
// claimed or rewritten since the SELECT no longer matches its updated_at and is left alone.
// The UPDATE finds the selected rows by their ids as an array (one primary-key look-up each):
// joined on the CTE alone, PostgreSQL hashed it against every QUEUED row of the partition.
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
 WHERE d.id = ANY(ARRAY(SELECT id FROM stale)) AND d.id = stale.id AND d.status = 'QUEUED' AND d.updated_at = stale.updated_at`

// ReapQueued returns at most limit QUEUED rows of priority p past lease, or marked QUEUED
// before watermark (nil: unknown), to PENDING (reapQueuedSQL), and returns how many.
func ReapQueued(ctx context.Context, db DB, p herald.Priority, lease time.Duration, limit int, watermark *time.Time) (int64, error) {
	tag, err := db.Exec(ctx, reapQueuedSQL, string(p), lease.Seconds(), limit, watermark)
	if err != nil {
		return 0, fmt.Errorf("reap QUEUED %s deliveries: %w", p, err)
	}
	return tag.RowsAffected(), nil
}

// reapSendingSQL returns SENDING rows whose lease ($1 s) is over to PENDING, due now, and
// logs the attempt that was in flight as AMBIGUOUS: the worker may have died before or after
// the provider accepted the message. The attempt number is the row's attempts (the worker's
// claim incremented it); ON CONFLICT DO NOTHING keeps an outcome the worker did manage to
// write. What to do with an ambiguous attempt is dispatch's policy, applied when it claims
// the row again. The compare-and-set is on (SENDING, attempts, updated_at) as selected: a
// worker that recorded its outcome in between keeps it. "attempts > 0" (true of every SENDING
// row: a claim counts its attempt) is delivery_sending's predicate (migration 00130), which
// only this query states, so that the outcome's UPDATE never reads that index.
var reapSendingSQL = `
WITH stale AS (
    SELECT id, attempts, updated_at
      FROM delivery
     WHERE status = 'SENDING' AND attempts > 0
       AND updated_at < now() - make_interval(secs => $1)
     ORDER BY updated_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED),
reaped AS (
    UPDATE delivery AS d
       SET status = ` + backToPending("d") + `, next_attempt_at = now()
      FROM stale
     WHERE d.id = stale.id AND d.status = 'SENDING'
       AND d.attempts = stale.attempts AND d.updated_at = stale.updated_at
 RETURNING d.id, d.attempts, d.priority, d.redrive_id, stale.updated_at AS claimed_at),
logged AS (
    INSERT INTO delivery_attempt (delivery_id, attempt, redrive_id, started_at, outcome, error)
    SELECT id, attempts, redrive_id, claimed_at, 'AMBIGUOUS', 'in flight past the SENDING lease; outcome unknown'
      FROM reaped
     WHERE attempts > 0
        ON CONFLICT DO NOTHING)
SELECT priority, count(*) FROM reaped GROUP BY priority`

// ReapSending returns at most limit SENDING rows past lease to PENDING (reapSendingSQL) and
// returns how many, by priority.
func ReapSending(ctx context.Context, db DB, lease time.Duration, limit int) (map[herald.Priority]int64, error) {
	rows, err := db.Query(ctx, reapSendingSQL, lease.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("reap SENDING deliveries: %w", err)
	}
	defer rows.Close()
	out := map[herald.Priority]int64{}
	for rows.Next() {
		var p herald.Priority
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			return nil, fmt.Errorf("reap SENDING deliveries: %w", err)
		}
		out[p] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reap SENDING deliveries: %w", err)
	}
	return out, nil
}
