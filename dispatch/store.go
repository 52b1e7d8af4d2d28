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
	CreatedAt      time.Time // when the API accepted the notification, by the database clock
	ClientID       string    // the API client that created the notification
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
const loadSelect = `
SELECT d.id::text, d.notification_id, d.channel, d.priority, d.status, d.attempts, d.expires_at, d.created_at,
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
`

// loadSQL reads one delivery; loadManySQL reads a batch in the same one round trip (ids as
// text, cast, as everywhere a batch of ids travels).
const (
	loadSQL     = loadSelect + `WHERE d.id = $1`
	loadManySQL = loadSelect + `WHERE d.id = ANY($1::text[]::uuid[])`
)

func load(ctx context.Context, pool *pgxpool.Pool, id string) (*row, error) {
	r, err := scanRow(pool.QueryRow(ctx, loadSQL, id), time.Now())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load delivery %s: %w", id, err)
	}
	return r, nil
}

// loadMany reads the deliveries of ids in one query; an id this database does not hold (or
// does not show yet) is missing from the result.
//
// The query runs on its generic plan. Left to choose, PostgreSQL plans it afresh on every
// execution (a custom plan for the array at hand looks cheaper than the generic one for the
// small batches a busy lane makes), and planning a six-table join with two sub-selects cost
// more than running it: about a quarter of the database's CPU per delivery in the limits-lifted
// benchmark. The setting is the session's only between SET and RESET, sent with the query in
// one round trip; should the query fail, the implicit transaction of the batch rolls the SET
// back with it.
//
// A batch of one (a HIGH record, a lane that is not busy) is read with loadSQL, which
// PostgreSQL keeps on its generic plan by itself, without the two extra statements.
func loadMany(ctx context.Context, pool *pgxpool.Pool, ids []string) (map[string]*row, error) {
	if len(ids) == 1 {
		r, err := load(ctx, pool, ids[0])
		if errors.Is(err, errNotFound) {
			return map[string]*row{}, nil
		}
		if err != nil {
			return nil, err
		}
		return map[string]*row{r.ID: r}, nil
	}
	at := time.Now()
	b := &pgx.Batch{}
	b.Queue(`SET plan_cache_mode = force_generic_plan`)
	b.Queue(loadManySQL, ids)
	b.Queue(`RESET plan_cache_mode`)
	br := pool.SendBatch(ctx, b)
	defer br.Close()
	out, err := scanMany(br, at, len(ids))
	if err == nil {
		_, err = br.Exec()
	}
	if err != nil {
		return nil, fmt.Errorf("load %d deliveries (first %s): %w", len(ids), ids[0], err)
	}
	return out, br.Close()
}

func scanMany(br pgx.BatchResults, at time.Time, n int) (map[string]*row, error) {
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]*row, n)
	for rows.Next() {
		r, err := scanRow(rows, at)
		if err != nil {
			return nil, err
		}
		out[r.ID] = r
	}
	return out, rows.Err()
}

func scanRow(s pgx.Row, loadedAt time.Time) (*row, error) {
	r := &row{loadedAt: loadedAt}
	err := s.Scan(&r.ID, &r.NotificationID, &r.Channel, &r.Priority,
		&r.Status, &r.Attempts, &r.ExpiresAt, &r.CreatedAt, &r.Due, &r.Expired, &r.DBNow,
		&r.ClientID, &r.UserID, &r.Template, &r.Category, &r.Payload, &r.To, &r.Content,
		&r.Email, &r.Phone, &r.WebhookURL, &r.Locale, &r.TimeZone,
		&r.QuietStart, &r.QuietEnd, &r.PushTokens, &r.LastOutcome)
	return r, err
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
