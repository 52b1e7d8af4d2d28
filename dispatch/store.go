package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald"
)

// errNotFound: the record names a delivery this database does not hold.
var errNotFound = errors.New("delivery not found")

// row is a delivery with what its send needs, read in one query.
type row struct {
	ID             string
	NotificationID string
	Channel        herald.Channel
	Priority       herald.Priority
	Status         herald.Status
	Attempts       int
	ExpiresAt      *time.Time
	Due            bool // next_attempt_at <= now()
	Expired        bool // expires_at <= now()
	DBNow          time.Time
	ClientID       string // the API client that created the notification
	UserID         int64
	Template       string
	Category       string
	Payload        json.RawMessage
	To             json.RawMessage // notification.recipient, the inline override
	Content        json.RawMessage // template.content
	Email          *string
	Phone          *string
	WebhookURL     *string
	Locale         *string
	TimeZone       *string
	QuietStart     pgtype.Time
	QuietEnd       pgtype.Time
	PushTokens     json.RawMessage // [{"token":..,"platform":..}]
	LastOutcome    *string         // outcome of attempt number Attempts, if logged
	loadedAt       time.Time       // local monotonic time of the read, to advance DBNow
}

// loadSQL reads a delivery, the parts of its notification a send needs, its template's
// content, the user's contact, push tokens and quiet hours, in one round trip. "Due" and
// "expired" are decided here by the database clock; now() comes back so that a retry time
// computed later can be anchored on the same clock. Push tokens are only gathered for PUSH.
const loadSQL = `
SELECT d.notification_id, d.channel, d.priority, d.status, d.attempts, d.expires_at,
       d.next_attempt_at <= now(),
       d.expires_at IS NOT NULL AND d.expires_at <= now(),
       now(),
       n.client_id::text, n.user_id, n.template, n.category, n.payload, n.recipient,
       t.content,
       c.email, c.phone, c.webhook_url, c.locale, c.time_zone,
       p.quiet_start, p.quiet_end,
       CASE WHEN d.channel = 'PUSH' THEN (
           SELECT coalesce(jsonb_agg(jsonb_build_object('token', pt.token, 'platform', pt.platform)
                                     ORDER BY pt.created_at), '[]')
           FROM push_token pt WHERE pt.user_id = n.user_id)
       END,
       (SELECT a.outcome FROM delivery_attempt a WHERE a.delivery_id = d.id AND a.attempt = d.attempts)
FROM delivery d
JOIN notification n ON n.id = d.notification_id
LEFT JOIN template t ON t.name = n.template
LEFT JOIN user_contact c ON c.user_id = n.user_id
LEFT JOIN user_preference p ON p.user_id = n.user_id
WHERE d.id = $1`

func load(ctx context.Context, pool *pgxpool.Pool, id string) (*row, error) {
	r := &row{ID: id, loadedAt: time.Now()}
	err := pool.QueryRow(ctx, loadSQL, id).Scan(&r.NotificationID, &r.Channel, &r.Priority,
		&r.Status, &r.Attempts, &r.ExpiresAt, &r.Due, &r.Expired, &r.DBNow,
		&r.ClientID, &r.UserID, &r.Template, &r.Category, &r.Payload, &r.To, &r.Content,
		&r.Email, &r.Phone, &r.WebhookURL, &r.Locale, &r.TimeZone,
		&r.QuietStart, &r.QuietEnd, &r.PushTokens, &r.LastOutcome)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load delivery %s: %w", id, err)
	}
	return r, nil
}

// claimSQL takes a delivery for one attempt: only from PENDING or QUEUED (a worker may see
// the row before the relay marked it QUEUED), only at the attempt count that was read, only
// if due and not expired by the database clock. Exactly one worker can win it; the winner
// alone calls the provider. started_at of the attempt row is the returned now().
const claimSQL = `
UPDATE delivery SET status = 'SENDING', attempts = attempts + 1
WHERE id = $1 AND status IN ('PENDING', 'QUEUED') AND attempts = $2
  AND next_attempt_at <= now() AND (expires_at IS NULL OR expires_at > now())
RETURNING attempts, now()`

// claim returns ok=false when another worker, the relay or the reaper changed the row first.
func claim(ctx context.Context, pool *pgxpool.Pool, id string, attempts int) (attempt int, startedAt time.Time, ok bool, err error) {
	err = pool.QueryRow(ctx, claimSQL, id, attempts).Scan(&attempt, &startedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("claim delivery %s attempt %d: %w", id, attempts+1, err)
	}
	return attempt, startedAt, true, nil
}

// unclaimSQL hands back a claim that never reached the provider (rate-limited, or the lane
// stopped while waiting for capacity): the row goes back to PENDING at next_attempt_at with
// the attempt count it had before the claim, and no attempt row is written. A deferral is
// not an attempt.
const unclaimSQL = `
UPDATE delivery SET status = 'PENDING', attempts = attempts - 1,
       next_attempt_at = now() + make_interval(secs => $3)
WHERE id = $1 AND status = 'SENDING' AND attempts = $2`

func unclaim(ctx context.Context, pool *pgxpool.Pool, id string, attempt int, d time.Duration) (bool, error) {
	tag, err := pool.Exec(ctx, unclaimSQL, id, attempt, d.Seconds())
	if err != nil {
		return false, fmt.Errorf("defer delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// giveUpSQL ends an unclaimed delivery FAILED without a provider call and without a new
// attempt: its last attempt (logged already, typically AMBIGUOUS by the reaper) was its last
// allowed one, or its ambiguous outcome is not to be retried.
const giveUpSQL = `
UPDATE delivery SET status = 'FAILED', last_error = $3
WHERE id = $1 AND status IN ('PENDING', 'QUEUED') AND attempts = $2`

func giveUp(ctx context.Context, pool *pgxpool.Pool, id string, attempts int, reason string) (bool, error) {
	tag, err := pool.Exec(ctx, giveUpSQL, id, attempts, reason)
	if err != nil {
		return false, fmt.Errorf("fail delivery %s after attempt %d: %w", id, attempts, err)
	}
	return tag.RowsAffected() == 1, nil
}

// expireSQL ends an unclaimed delivery whose expires_at passed. The decision is logged as an
// attempt without a provider call, so attempts counts the attempt rows.
const expireSQL = `
WITH d AS (
    UPDATE delivery SET status = 'EXPIRED', attempts = attempts + 1, last_error = 'expired'
    WHERE id = $1 AND status IN ('PENDING', 'QUEUED') AND attempts = $2
      AND expires_at IS NOT NULL AND expires_at <= now()
    RETURNING id, attempts)
INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome, error)
SELECT id, attempts, now(), 'EXPIRED', 'expired before send' FROM d`

func expire(ctx context.Context, pool *pgxpool.Pool, id string, attempts int) (bool, error) {
	tag, err := pool.Exec(ctx, expireSQL, id, attempts)
	if err != nil {
		return false, fmt.Errorf("expire delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// outcome is what an attempt ended in.
type outcome struct {
	Status       herald.Status // SENT, PENDING (retry), FAILED or EXPIRED
	AttemptClass string        // SENT, TRANSIENT, PERMANENT, AMBIGUOUS, EXPIRED
	RetryIn      time.Duration // PENDING only: from now() to next_attempt_at
	Error        string
	Provider     string
	ProviderID   string
	ProviderCode string
}

// The outcome is one statement: a conditional UPDATE on (id, SENDING, attempt) and, only if
// it matched, one attempt row — atomic, and one round trip after the provider call. A late
// worker (its row reaped and re-claimed) matches nothing and writes nothing, so it can never
// overwrite a newer state. Parameters: $1 id, $2 attempt, $3 started_at, $4 attempt outcome,
// $5 error, $6 provider, $7 provider code, $8 the status's own value.
const attemptInsert = `
INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome, error, provider, provider_code, next_attempt_at)
SELECT id, attempts, $3, $4, $5, $6, $7, %s FROM d`

var (
	sentSQL = `WITH d AS (
UPDATE delivery SET status = 'SENT', sent_at = now(), provider = $6, provider_message_id = $8, last_error = NULL
WHERE id = $1 AND status = 'SENDING' AND attempts = $2 RETURNING id, attempts)` + fmt.Sprintf(attemptInsert, "NULL")
	retrySQL = `WITH d AS (
UPDATE delivery SET status = 'PENDING', next_attempt_at = now() + make_interval(secs => $8), last_error = $5,
       provider = coalesce($6, provider)
WHERE id = $1 AND status = 'SENDING' AND attempts = $2 RETURNING id, attempts, next_attempt_at)` + fmt.Sprintf(attemptInsert, "d.next_attempt_at")
	failSQL = `WITH d AS (
UPDATE delivery SET status = 'FAILED', last_error = $5, provider = coalesce($6, provider)
WHERE id = $1 AND status = 'SENDING' AND attempts = $2 RETURNING id, attempts)` + fmt.Sprintf(attemptInsert, "NULL")
	expiredSQL = `WITH d AS (
UPDATE delivery SET status = 'EXPIRED', last_error = $5
WHERE id = $1 AND status = 'SENDING' AND attempts = $2 RETURNING id, attempts)` + fmt.Sprintf(attemptInsert, "NULL")
)

// record writes o for attempt. It returns false when the row was no longer this attempt's.
func record(ctx context.Context, pool *pgxpool.Pool, id string, attempt int, startedAt time.Time, o outcome) (bool, error) {
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
	tag, err := pool.Exec(ctx, sql, args...)
	if err != nil {
		return false, fmt.Errorf("record delivery %s attempt %d %s: %w", id, attempt, o.Status, err)
	}
	return tag.RowsAffected() == 1, nil
}

// dropTokensSQL removes push tokens a provider reported as no longer valid. It only touches
// the user's stored tokens; tokens given inline in a notification are not stored.
const dropTokensSQL = `DELETE FROM push_token WHERE user_id = $1 AND token = ANY($2)`

func dropPushTokens(ctx context.Context, pool *pgxpool.Pool, userID int64, tokens []string) (int64, error) {
	tag, err := pool.Exec(ctx, dropTokensSQL, userID, tokens)
	if err != nil {
		return 0, fmt.Errorf("drop %d invalid push tokens of user %d: %w", len(tokens), userID, err)
	}
	return tag.RowsAffected(), nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
