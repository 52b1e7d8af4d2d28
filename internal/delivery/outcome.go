package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
)

// Outcome is what a claimed attempt ended in.
type Outcome struct {
	Status       herald.Status // SENT, PENDING (retry), FAILED or EXPIRED
	AttemptClass string        // SENT, TRANSIENT, PERMANENT, AMBIGUOUS, EXPIRED
	RetryIn      time.Duration // PENDING only: from now() to next_attempt_at
	Error        string
	Provider     string
	ProviderID   string
	ProviderCode string
}

// An outcome is one statement: a conditional UPDATE on (id, SENDING, attempt) and, only if
// it matched, one attempt row — atomic, and one round trip after the provider call. A late
// worker (its row reaped and re-claimed) matches nothing and writes nothing, so it can never
// overwrite a newer state. Parameters: $1 id, $2 attempt, $3 started_at, $4 attempt outcome,
// $5 error, $6 provider, $7 provider code, $8 the status's own value. The four statements
// differ only in the delivery's new state; attemptInsert is their common tail, ended by
// the attempt row's next_attempt_at. The attempt row names the delivery's re-drive, if any.
const attemptInsert = `
INSERT INTO delivery_attempt (delivery_id, attempt, redrive_id, started_at, outcome, error, provider, provider_code, next_attempt_at)
SELECT id, attempts, redrive_id, $3, $4, $5, $6, $7, `

// sentSQL: the provider accepted the message ($8: its message id).
const sentSQL = `WITH d AS (
UPDATE delivery SET status = 'SENT', sent_at = now(), provider = $6, provider_message_id = $8, last_error = NULL
WHERE id = $1 AND status = 'SENDING' AND attempts = $2 RETURNING id, attempts, redrive_id)` + attemptInsert + `NULL FROM d`

// retrySQL: back to PENDING, due $8 s from now(); the attempt row keeps the retry time.
var retrySQL = `WITH d AS (
UPDATE delivery SET status = ` + backToPending("delivery") + `, next_attempt_at = now() + make_interval(secs => $8), last_error = $5,
       provider = coalesce($6, provider)
WHERE id = $1 AND status = 'SENDING' AND attempts = $2 RETURNING id, attempts, redrive_id, next_attempt_at)` + attemptInsert + `d.next_attempt_at FROM d`

// failSQL: a permanent error, or the last allowed attempt failed.
const failSQL = `WITH d AS (
UPDATE delivery SET status = 'FAILED', last_error = $5, provider = coalesce($6, provider)
WHERE id = $1 AND status = 'SENDING' AND attempts = $2 RETURNING id, attempts, redrive_id)` + attemptInsert + `NULL FROM d`

// expiredSQL: the claim expired before the provider was called (waiting for rate-limit
// capacity).
const expiredSQL = `WITH d AS (
UPDATE delivery SET status = 'EXPIRED', last_error = $5
WHERE id = $1 AND status = 'SENDING' AND attempts = $2 RETURNING id, attempts, redrive_id)` + attemptInsert + `NULL FROM d`

// Record writes o for claimed attempt attempt, started at startedAt, with the statement of
// o.Status. It returns false when the row was no longer this attempt's.
func Record(ctx context.Context, db DB, id string, attempt int, startedAt time.Time, o Outcome) (bool, error) {
	args := []any{id, attempt, startedAt, o.AttemptClass, nullable(o.Error), nullable(o.Provider), nullable(o.ProviderCode)}
	var sql string
	switch o.Status {
	case herald.StatusSent:
		sql, args = sentSQL, append(args, nullable(o.ProviderID))
	case herald.StatusPending:
		sql, args = retrySQL, append(args, o.RetryIn.Seconds())
	case herald.StatusFailed:
		sql = failSQL
	case herald.StatusExpired:
		sql = expiredSQL
	default:
		return false, fmt.Errorf("record delivery %s attempt %d: unexpected status %s", id, attempt, o.Status)
	}
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return false, fmt.Errorf("record delivery %s attempt %d %s: %w", id, attempt, o.Status, err)
	}
	return tag.RowsAffected() == 1, nil
}
