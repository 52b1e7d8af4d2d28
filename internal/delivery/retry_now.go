package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// retryNowSQL ends a claimed attempt that failed and claims the next one in the same worker,
// in one statement and one commit: the row stays SENDING with its attempt count one higher,
// and the failed attempt is logged with next_attempt_at = now() (it was retried at once).
// Dispatch uses it when a channel's routing sends the retry to another provider account at
// once (dispatch/route's RetryAtOnce): the retry then takes no trip through the relay and
// Kafka, since the row never becomes PENDING. The compare-and-set is on (SENDING, the failed
// attempt): a late worker, whose row the reaper took, matches nothing and writes nothing.
// The delivery keeps the failed attempt's account and error as for a retry that goes back to
// PENDING (recordBatchSQL); the new attempt's started_at is the returned now().
const retryNowSQL = `
WITH d AS (
    UPDATE delivery SET attempts = attempts + 1, provider = coalesce($4, provider), last_error = $5
    WHERE id = $1::uuid AND status = 'SENDING' AND attempts = $2
    RETURNING id, attempts, redrive_id),
a AS (
    INSERT INTO delivery_attempt (delivery_id, attempt, redrive_id, started_at, outcome, error, provider, provider_code,
                                  next_attempt_at, tokens_removed)
    SELECT id, attempts - 1, redrive_id, $3, $6, $5, $4, $7, now(), $8 FROM d)
SELECT attempts, now() FROM d`

// RetryNow logs rec's failed attempt (rec.Outcome: its class, error, account and code; its
// Status and RetryIn are not used) and claims the delivery's next attempt (retryNowSQL).
// ok=false: the row was no longer rec's attempt's, and nothing was written.
func RetryNow(ctx context.Context, db DB, rec Recording) (next Claimed, ok bool, err error) {
	o := rec.Outcome
	err = db.QueryRow(ctx, retryNowSQL, pgx.QueryExecModeExec, rec.ID, rec.Attempt, rec.StartedAt,
		nullable(o.Provider), nullable(o.Error), string(o.AttemptClass), nullable(o.ProviderCode), o.TokensRemoved).
		Scan(&next.Attempt, &next.StartedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Claimed{}, false, nil
	case err != nil:
		return Claimed{}, false, fmt.Errorf("retry delivery %s after attempt %d: %w", rec.ID, rec.Attempt, err)
	}
	return next, true, nil
}
