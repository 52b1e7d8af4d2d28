package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
)

// DueRow is a PENDING row the sweeper publishes.
type DueRow struct {
	Version
	NotificationID string
	Channel        herald.Channel
	Priority       herald.Priority
	Traceparent    string // "" when the row has none
	// BecameDue: the row was not due when written (a retry, a scheduled send, quiet hours);
	// false: it was, and the stream missed it.
	BecameDue bool
}

// dueSQL finds the PENDING rows that are due now but that the stream did not, or will not,
// publish, highest priority first, then oldest next_attempt_at first:
//
//   - next_attempt_at > updated_at: the row was not due when it was written (a retry with
//     back-off, a scheduled send, a quiet-hours deferral). The passing of time writes no WAL,
//     so only a scan can see it become due.
//   - updated_at older than the grace period ($1 s): the row was due when written, but it is
//     still PENDING long after the stream should have published it and Kafka acknowledged it
//     (the slot was recreated, the relay was down, marking it QUEUED failed).
//
// Priority comes first so that a HIGH retry never waits behind a due LOW backlog larger than
// one batch. The query is one branch per priority, each walking delivery_pending_by_priority
// (partial on status = 'PENDING', on (priority, next_attempt_at)) as a range scan of that
// priority's due rows, oldest first, stopping at $2 rows; the outer sort handles at most
// 3 × $2 rows. A single ORDER BY over a priority rank could not use an index range: it would
// read every future-dated HIGH row before the first due NORMAL one. With 100,000 due LOW rows
// and one due HIGH row (PostgreSQL 15, internal/delivery's TestDueOrdersByPriority fixture):
//
//	Limit (actual rows=1000)
//	  ->  Sort (Sort Key: rank, next_attempt_at; quicksort, 165kB)
//	        ->  Append (actual rows=1001)
//	              ->  Limit -> Index Scan using delivery_pending_by_priority (actual rows=1)
//	                    Index Cond: ((priority = 'HIGH') AND (next_attempt_at <= now()))
//	              ->  Limit -> Index Scan using delivery_pending_by_priority (actual rows=0)
//	                    Index Cond: ((priority = 'NORMAL') AND (next_attempt_at <= now()))
//	              ->  Limit -> Index Scan using delivery_pending_by_priority (actual rows=1000)
//	                    Index Cond: ((priority = 'LOW') AND (next_attempt_at <= now()))
//	Execution Time: 0.6 ms
const dueSQL = `
SELECT id, notification_id, channel, priority, attempts, next_attempt_at, updated_at, traceparent, became_due
  FROM (
    (SELECT 0 AS rank, id::text, notification_id::text, channel, priority, attempts, next_attempt_at, updated_at,
            coalesce(traceparent, '') AS traceparent, next_attempt_at > updated_at AS became_due
       FROM delivery
      WHERE status = 'PENDING' AND priority = 'HIGH' AND next_attempt_at <= now()
        AND (next_attempt_at > updated_at OR updated_at < now() - make_interval(secs => $1))
      ORDER BY next_attempt_at
      LIMIT $2)
    UNION ALL
    (SELECT 1, id::text, notification_id::text, channel, priority, attempts, next_attempt_at, updated_at,
            coalesce(traceparent, ''), next_attempt_at > updated_at
       FROM delivery
      WHERE status = 'PENDING' AND priority = 'NORMAL' AND next_attempt_at <= now()
        AND (next_attempt_at > updated_at OR updated_at < now() - make_interval(secs => $1))
      ORDER BY next_attempt_at
      LIMIT $2)
    UNION ALL
    (SELECT 2, id::text, notification_id::text, channel, priority, attempts, next_attempt_at, updated_at,
            coalesce(traceparent, ''), next_attempt_at > updated_at
       FROM delivery
      WHERE status = 'PENDING' AND priority = 'LOW' AND next_attempt_at <= now()
        AND (next_attempt_at > updated_at OR updated_at < now() - make_interval(secs => $1))
      ORDER BY next_attempt_at
      LIMIT $2)
  ) AS due
 ORDER BY rank, next_attempt_at
 LIMIT $2`

// Due returns at most limit rows for the sweeper to publish (dueSQL). It is a read: the rows
// change state only when MarkQueued marks what Kafka acknowledged.
func Due(ctx context.Context, db DB, grace time.Duration, limit int) ([]DueRow, error) {
	rows, err := db.Query(ctx, dueSQL, grace.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("select due deliveries: %w", err)
	}
	defer rows.Close()
	var out []DueRow
	for rows.Next() {
		var r DueRow
		if err := rows.Scan(&r.ID, &r.NotificationID, &r.Channel, &r.Priority, &r.Attempts,
			&r.NextAttemptAt, &r.UpdatedAt, &r.Traceparent, &r.BecameDue); err != nil {
			return nil, fmt.Errorf("scan due delivery: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select due deliveries: %w", err)
	}
	return out, nil
}

// expireDueSQL ends PENDING rows whose expires_at has passed, EXPIRED, at most $1 of them,
// oldest expiry first. Without it a row whose next_attempt_at lies after its expires_at (a
// retry or a scheduled send past the expiry) would stay PENDING until it became due, only to
// be expired by the worker then. The decision is logged as an attempt without a provider
// call, as Expire logs it, so attempts counts the attempt rows.
//
// The inner SELECT walks delivery_pending_expiry (partial on PENDING rows with an expiry)
// and skips rows locked by a claim in progress; the UPDATE is the compare-and-set on
// (PENDING, attempts) as selected, re-checked on the row's latest version.
const expireDueSQL = `
WITH due AS (
    SELECT id, attempts
      FROM delivery
     WHERE status = 'PENDING' AND expires_at <= now()
     ORDER BY expires_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED),
expired AS (
    UPDATE delivery AS d
       SET status = 'EXPIRED', attempts = d.attempts + 1, last_error = 'expired'
      FROM due
     WHERE d.id = due.id AND d.status = 'PENDING' AND d.attempts = due.attempts
       AND d.expires_at <= now()
 RETURNING d.id, d.attempts, d.redrive_id)
INSERT INTO delivery_attempt (delivery_id, attempt, redrive_id, started_at, outcome, error)
SELECT id, attempts, redrive_id, now(), 'EXPIRED', 'expired before send' FROM expired`

// ExpireDue expires at most limit PENDING rows past their expires_at (expireDueSQL) and
// returns how many it expired.
func ExpireDue(ctx context.Context, db DB, limit int) (int64, error) {
	tag, err := db.Exec(ctx, expireDueSQL, limit)
	if err != nil {
		return 0, fmt.Errorf("expire PENDING deliveries past their expiry: %w", err)
	}
	return tag.RowsAffected(), nil
}
