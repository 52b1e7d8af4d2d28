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
const loadSQL = `
SELECT d.notification_id, d.channel, d.priority, d.status, d.attempts, d.expires_at, d.created_at,
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
		&r.Status, &r.Attempts, &r.ExpiresAt, &r.CreatedAt, &r.Due, &r.Expired, &r.DBNow,
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
