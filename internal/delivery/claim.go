package delivery

import (
	"context"
	"fmt"
	"time"
)

// Claim is ClaimBatch for one delivery read with attempts attempts: a claim of one is a batch
// of one, and like every batch of one it waits for the row's lock. ok=false: another worker,
// the relay or the reaper changed the row first (or it was not due, or had expired).
func Claim(ctx context.Context, db DB, id string, attempts int) (attempt int, startedAt time.Time, ok bool, err error) {
	claimed, err := ClaimBatch(ctx, db, []Seen{{ID: id, Attempts: attempts}})
	for _, c := range claimed {
		return c.Attempt, c.StartedAt, true, nil
	}
	return 0, time.Time{}, false, err
}

// unclaimSQL hands back a claim that never reached the provider (rate-limited, or the lane
// stopped while waiting for capacity): the row goes back to PENDING at now() + $3 s with the
// attempt count it had before the claim, and no attempt row is written. A deferral is not an
// attempt. The compare-and-set is on (SENDING, the claimed attempt).
var unclaimSQL = `
UPDATE delivery SET status = ` + backToPending("delivery") + `, attempts = attempts - 1,
       next_attempt_at = now() + make_interval(secs => $3)
WHERE id = $1 AND status = 'SENDING' AND attempts = $2`

// Unclaim defers claimed attempt attempt by d without using it up (unclaimSQL). false: the
// row was no longer this claim's.
func Unclaim(ctx context.Context, db DB, id string, attempt int, d time.Duration) (bool, error) {
	tag, err := db.Exec(ctx, unclaimSQL, id, attempt, d.Seconds())
	if err != nil {
		return false, fmt.Errorf("defer delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// giveUpSQL ends an unclaimed delivery FAILED without a provider call and without a new
// attempt: its last attempt (logged already, typically AMBIGUOUS by the reaper) was its last
// allowed one, or its ambiguous outcome is not to be retried. The compare-and-set is on
// (PENDING or QUEUED, the attempt count that was read).
const giveUpSQL = `
UPDATE delivery SET status = 'FAILED', last_error = $3
WHERE id = $1 AND status IN ('PENDING', 'QUEUED') AND attempts = $2`

// GiveUp ends a delivery read with attempts attempts FAILED for reason (giveUpSQL). false:
// the row moved on.
func GiveUp(ctx context.Context, db DB, id string, attempts int, reason string) (bool, error) {
	tag, err := db.Exec(ctx, giveUpSQL, id, attempts, reason)
	if err != nil {
		return false, fmt.Errorf("fail delivery %s after attempt %d: %w", id, attempts, err)
	}
	return tag.RowsAffected() == 1, nil
}

// expireSQL ends an unclaimed delivery whose expires_at passed, by the database clock. The
// decision is logged as an attempt without a provider call, so attempts counts the attempt
// rows. The compare-and-set is on (PENDING or QUEUED, the attempt count that was read).
const expireSQL = `
WITH d AS (
    UPDATE delivery SET status = 'EXPIRED', attempts = attempts + 1, last_error = 'expired'
    WHERE id = $1 AND status IN ('PENDING', 'QUEUED') AND attempts = $2
      AND expires_at IS NOT NULL AND expires_at <= now()
    RETURNING id, attempts, redrive_id)
INSERT INTO delivery_attempt (delivery_id, attempt, redrive_id, started_at, outcome, error)
SELECT id, attempts, redrive_id, now(), 'EXPIRED', 'expired before send' FROM d`

// Expire ends a delivery read with attempts attempts EXPIRED (expireSQL). false: the row
// moved on, or has not expired.
func Expire(ctx context.Context, db DB, id string, attempts int) (bool, error) {
	tag, err := db.Exec(ctx, expireSQL, id, attempts)
	if err != nil {
		return false, fmt.Errorf("expire delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}
