package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald"
)

// Lot is one lot of a campaign's expansion: the notifications of up to a thousand users that
// share everything but the user, each with the deliveries the routing rules left for it.
type Lot struct {
	CampaignID  uuid.UUID
	ClientID    string // api_client.id of the campaign's creator
	RequestHash []byte // the campaign request's hash, on every notification
	Template    string
	Category    string
	Payload     []byte // JSON object, shared by every notification; nil: {}
	Priority    herald.Priority
	SendAt      *time.Time
	ExpiresAt   *time.Time
	Users       []LotUser
}

// LotUser is one user's notification in a Lot.
type LotUser struct {
	NotificationID uuid.UUID
	// IdempotencyKey is derived from the campaign and the user, so that a lot that runs again
	// (after a crash before its commit became known) inserts nothing twice.
	IdempotencyKey string
	UserID         int64
	Response       []byte // the notification's GET /api/notifications answer body
	// NextAttemptAt is when the user's deliveries are first due (sendAt, quiet hours); nil: now().
	NextAttemptAt *time.Time
	Deliveries    []New
}

// insertLotSQL writes a lot's notifications and their delivery rows, PENDING, in one
// statement: the per-user columns travel as parallel arrays through unnest, the shared ones
// once as scalars. It is insertSQL for many notifications at once, with the same condition:
// each notification first claims its (client_id, idempotency_key) in idempotency_key, and one
// whose key exists already is skipped (ON CONFLICT DO NOTHING), and so are its deliveries,
// which join the notification insert's RETURNING. next_attempt_at NULL means now(), as in
// insertSQL, so the relay publishes the row at commit.
const insertLotSQL = `
WITH u AS (
    SELECT * FROM unnest($10::uuid[], $11::text[], $12::bigint[], $13::text[]) AS u (id, key, user_id, response)
), k AS (
    INSERT INTO idempotency_key (client_id, idempotency_key, notification_id, request_hash)
    SELECT $1, u.key, u.id, $2 FROM u
    ON CONFLICT (client_id, idempotency_key) DO NOTHING
    RETURNING notification_id
), n AS (
    INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template,
                              category, payload, priority, send_at, expires_at, response, campaign_id)
    SELECT u.id, $1, u.key, $2, u.user_id, $3, $4, coalesce($5::jsonb, '{}'), $6, $7, $8, u.response::jsonb, $9
    FROM u JOIN k ON k.notification_id = u.id
    RETURNING id, priority, expires_at
), d AS (
    INSERT INTO delivery (id, notification_id, channel, priority, expires_at, next_attempt_at)
    SELECT u.id, n.id, u.channel, n.priority, n.expires_at, coalesce(u.next_attempt_at, now())
    FROM unnest($14::uuid[], $15::uuid[], $16::text[], $17::timestamptz[])
         AS u (id, notification_id, channel, next_attempt_at)
    JOIN n ON n.id = u.notification_id
    RETURNING 1
)
SELECT (SELECT count(*) FROM n), (SELECT count(*) FROM d)`

// InsertLot writes lot (insertLotSQL) and returns how many notifications and deliveries it
// wrote; users whose notification existed already are skipped. Run it inside the transaction
// that also moves the campaign's expansion cursor.
func InsertLot(ctx context.Context, db DB, lot Lot) (notifications, deliveries int, err error) {
	n := len(lot.Users)
	nids := make([]pgtype.UUID, n)
	keys := make([]string, n)
	users := make([]int64, n)
	responses := make([]string, n)
	var dids, dnids []pgtype.UUID
	var channels []string
	var next []pgtype.Timestamptz
	for i, u := range lot.Users {
		nids[i], keys[i], users[i], responses[i] = pgtype.UUID{Bytes: u.NotificationID, Valid: true}, u.IdempotencyKey, u.UserID, string(u.Response)
		at := pgtype.Timestamptz{}
		if u.NextAttemptAt != nil {
			at = pgtype.Timestamptz{Time: *u.NextAttemptAt, Valid: true}
		}
		for _, d := range u.Deliveries {
			dids = append(dids, pgtype.UUID{Bytes: d.ID, Valid: true})
			dnids = append(dnids, nids[i])
			channels = append(channels, string(d.Channel))
			next = append(next, at)
		}
	}
	var payload any
	if lot.Payload != nil {
		payload = lot.Payload
	}
	err = db.QueryRow(ctx, insertLotSQL,
		lot.ClientID, lot.RequestHash, lot.Template, lot.Category, payload, string(lot.Priority),
		lot.SendAt, lot.ExpiresAt, pgtype.UUID{Bytes: lot.CampaignID, Valid: true},
		nids, keys, users, responses, dids, dnids, channels, next,
	).Scan(&notifications, &deliveries)
	if err != nil {
		return 0, 0, fmt.Errorf("insert lot of %d notifications of campaign %s: %w", n, lot.CampaignID, err)
	}
	return notifications, deliveries, nil
}
