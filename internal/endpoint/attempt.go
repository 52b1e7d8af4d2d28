package endpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Result is what one attempt led to (webhook_attempt.result).
type Result string

const (
	// ResultDelivered: the endpoint answered 2xx; the message is DELIVERED.
	ResultDelivered Result = "DELIVERED"
	// ResultRetry: a network error, a 5xx or a 429; the message waits for its next try.
	ResultRetry Result = "RETRY"
	// ResultDropped: another 4xx, a blocked address, or the schedule ran out; DROPPED.
	ResultDropped Result = "DROPPED"
	// ResultGone: 410; the endpoint is disabled and the message waits for Enable.
	ResultGone Result = "GONE"
)

// Attempt is one POST of a message, as the attempts log shows it.
type Attempt struct {
	EventID     string    `json:"eventId"`
	Attempt     int       `json:"attempt"`
	AttemptedAt time.Time `json:"attemptedAt"`
	// StatusCode is the endpoint's HTTP status; absent when no answer came.
	StatusCode *int    `json:"statusCode,omitempty"`
	Result     Result  `json:"result"`
	Error      string  `json:"error,omitempty"`
	DurationMs float64 `json:"durationMs"`
}

// Outcome is the result of one attempt, as the worker records it.
type Outcome struct {
	StatusCode int // 0: no answer
	Error      string
	Duration   time.Duration
	// NextAttemptAt is when a RETRY tries again.
	NextAttemptAt time.Time
}

// Every transition of a message after an attempt is one statement: the compare-and-set on
// (status PENDING, attempts as the worker read them) moves the message, and the attempt row
// is written only when it did, so that a worker whose claim was taken over (it was too
// slow, or it is a ghost of a killed process) changes nothing.
const (
	deliverSQL = `
WITH m AS (
    UPDATE webhook_message SET status = 'DELIVERED', attempts = attempts + 1, finished_at = now(), locked_until = NULL
    WHERE endpoint_id = $1 AND event_id = $2 AND status = 'PENDING' AND attempts = $3
    RETURNING attempts)
INSERT INTO webhook_attempt (endpoint_id, event_id, attempt, status_code, result, error, duration_ms)
SELECT $1, $2, m.attempts, $4, 'DELIVERED', $5, $6 FROM m`
	retrySQL = `
WITH m AS (
    UPDATE webhook_message SET attempts = attempts + 1, next_attempt_at = $7, locked_until = NULL
    WHERE endpoint_id = $1 AND event_id = $2 AND status = 'PENDING' AND attempts = $3
    RETURNING attempts)
INSERT INTO webhook_attempt (endpoint_id, event_id, attempt, status_code, result, error, duration_ms)
SELECT $1, $2, m.attempts, $4, 'RETRY', $5, $6 FROM m`
	dropSQL = `
WITH m AS (
    UPDATE webhook_message SET status = 'DROPPED', attempts = attempts + 1, finished_at = now(), locked_until = NULL
    WHERE endpoint_id = $1 AND event_id = $2 AND status = 'PENDING' AND attempts = $3
    RETURNING attempts)
INSERT INTO webhook_attempt (endpoint_id, event_id, attempt, status_code, result, error, duration_ms)
SELECT $1, $2, m.attempts, $4, 'DROPPED', $5, $6 FROM m`
	// A 410 leaves the message PENDING and due, and counts no try of the schedule (the base
	// moves with it): it goes out first when the endpoint is enabled again.
	goneSQL = `
WITH m AS (
    UPDATE webhook_message SET attempts = attempts + 1, attempt_base = attempt_base + 1, next_attempt_at = now(), locked_until = NULL
    WHERE endpoint_id = $1 AND event_id = $2 AND status = 'PENDING' AND attempts = $3
    RETURNING attempts)
INSERT INTO webhook_attempt (endpoint_id, event_id, attempt, status_code, result, error, duration_ms)
SELECT $1, $2, m.attempts, $4, 'GONE', $5, $6 FROM m`
)

// Deliver records a 2xx: PENDING → DELIVERED. It reports whether the message moved.
func Deliver(ctx context.Context, db DB, m Message, o Outcome) (bool, error) {
	return record(ctx, db, deliverSQL, "deliver", m, o)
}

// Retry records a retryable failure: PENDING, due again at o.NextAttemptAt.
func Retry(ctx context.Context, db DB, m Message, o Outcome) (bool, error) {
	return record(ctx, db, retrySQL, "retry", m, o, o.NextAttemptAt)
}

// Drop records a final failure: PENDING → DROPPED.
func Drop(ctx context.Context, db DB, m Message, o Outcome) (bool, error) {
	return record(ctx, db, dropSQL, "drop", m, o)
}

// Gone records a 410: the message stays PENDING for when the endpoint is enabled again
// (the caller disables the endpoint with Disable).
func Gone(ctx context.Context, db DB, m Message, o Outcome) (bool, error) {
	return record(ctx, db, goneSQL, "park", m, o)
}

func record(ctx context.Context, db DB, sql, op string, m Message, o Outcome, extra ...any) (bool, error) {
	var code *int
	if o.StatusCode != 0 {
		code = &o.StatusCode
	}
	var msg *string
	if o.Error != "" {
		msg = &o.Error
	}
	args := append([]any{m.EndpointID, m.EventID, m.Attempts, code, msg, float64(o.Duration.Microseconds()) / 1000}, extra...)
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return false, fmt.Errorf("%s webhook message %s of endpoint %s: %w", op, m.EventID, m.EndpointID, err)
	}
	return tag.RowsAffected() == 1, nil
}

const listAttempts = `
SELECT a.event_id::text, a.attempt, a.attempted_at, a.status_code, a.result, coalesce(a.error, ''), a.duration_ms
FROM webhook_attempt a JOIN webhook_endpoint e ON e.id = a.endpoint_id
WHERE a.endpoint_id = $1 AND e.client_id = $2
ORDER BY a.attempted_at DESC, a.event_id, a.attempt DESC LIMIT $3`

// Attempts returns the latest limit attempts of endpoint id of clientID, newest first.
func Attempts(ctx context.Context, db DB, clientID, id string, limit int) ([]Attempt, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ErrNotFound
	}
	rows, err := db.Query(ctx, listAttempts, id, clientID, limit)
	if err != nil {
		return nil, fmt.Errorf("attempts of webhook endpoint %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := r.Scan(&a.EventID, &a.Attempt, &a.AttemptedAt, &a.StatusCode, &a.Result, &a.Error, &a.DurationMs)
		a.AttemptedAt = a.AttemptedAt.UTC()
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("attempts of webhook endpoint %s: %w", id, err)
	}
	return out, nil
}
