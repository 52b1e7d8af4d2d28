package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/pushtoken"
)

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
	LastOutcome    *string         // outcome of attempt number Attempts, if logged after the last re-drive
	LastProvider   *string         // provider account of attempt number Attempts, if known
	RedriveBase    int             // attempts the row had when it was last re-driven (0: never); the budget counts those after
	loadedAt       time.Time       // local monotonic time of the read, to advance DBNow
}

// loadDaySQL reads deliveries, the parts of their notification a send needs, their template's
// content, the user's contact, push tokens and quiet hours, in one round trip. "Due" and
// "expired" are decided here by the database clock; now() comes back so that a retry time
// computed later can be anchored on the same clock. Push tokens are only gathered for PUSH.
//
// It reads the deliveries $1 of one UTC day (ids as text, cast, as everywhere a batch of ids
// travels), bounded to the day's range of ids ({from} ≤ id < {to}), their notifications
// within {before} ≤ id < {to} (the day before theirs and theirs: a delivery is made with its
// notification, so its id is not earlier and lies at most a midnight later) and their last
// attempt within the day's range. The bounds are constants in the statement's text
// (loadStatement makes one text per day): every plan, generic included, holds the partitions
// of the ids' day only (docs/architecture.md, "Partitions and retention"), so the statement
// is prepared once per connection and day and runs on a generic plan. Planned on every read,
// it spent 0.7–4 ms planning against 0.1 ms executing (docs/dispatch.md, "The claim and the
// read without planning").
//
// The notification and the attempt are LATERAL look-ups by primary key, one per delivery,
// whatever the statistics say. A day's partitions start empty at midnight and grow faster
// than autovacuum analyzes them; planned as joins from those statistics, the read once built
// a hash of every notification of the two days and scanned the attempt partition whole for
// each delivery (an attempt condition "delivery_id = ANY($1)" priced the index at one descent
// per id of the batch): 838 rows returned by scans per delivery in the throughput benchmark
// (docs/benchmarks.md, "Rows read per delivery"). The LIMIT keeps PostgreSQL from turning the
// look-ups back into joins.
const loadDaySQL = `
SELECT ` + loadColumns + loadFrom + `
WHERE d.id = ANY($1::text[]::uuid[])` + loadWithin

// loadColumns are the columns of a delivery's read (scanRow).
const loadColumns = `d.id::text, d.notification_id, d.channel, d.priority, d.status, d.attempts, d.expires_at, d.created_at,
       d.next_attempt_at <= now(),
       d.expires_at IS NOT NULL AND d.expires_at <= now(),
       now(),
       n.client_id::text, n.user_id, n.template, n.category, n.payload, n.recipient,
       t.content,
       c.email, c.phone, c.webhook_url, c.locale, c.time_zone,
       p.quiet_start, p.quiet_end,
       CASE WHEN d.channel = 'PUSH' THEN ` + pushtoken.NotificationJSON + ` END,
       CASE WHEN a.attempt > d.attempts_at_redrive THEN a.outcome END,
       a.provider,
       d.attempts_at_redrive`

// loadFrom is the read's FROM: the delivery d and its look-ups.
const loadFrom = `
FROM delivery d
JOIN LATERAL (SELECT n.client_id, n.user_id, n.template, n.category, n.payload, n.recipient
                FROM notification n
               WHERE n.id = d.notification_id AND n.id >= '{before}'::uuid AND n.id < '{to}'::uuid
               LIMIT 1) n ON true
LEFT JOIN LATERAL (SELECT a.attempt, a.outcome, a.provider
                     FROM delivery_attempt a
                    WHERE a.delivery_id = d.id AND a.attempt = d.attempts
                      AND a.delivery_id >= '{from}'::uuid AND a.delivery_id < '{to}'::uuid
                    LIMIT 1) a ON true
LEFT JOIN template t ON t.name = n.template
LEFT JOIN user_contact c ON c.user_id = n.user_id
LEFT JOIN user_preference p ON p.user_id = n.user_id`

// loadWithin bounds d.id to the day's range of ids.
const loadWithin = ` AND d.id >= '{from}'::uuid AND d.id < '{to}'::uuid`

// loadStatement is loadDaySQL for day, its bounds filled in; a day's text is made once.
func loadStatement(day partition.Day) string {
	return dayStatement(loadKey{day: day}, loadDaySQL)
}

// dayStatement is sql with the bounds of key's day filled in, made once and kept in loadByDay
// under key.
func dayStatement(key loadKey, sql string) string {
	if sql, ok := loadByDay.Load(key); ok {
		return sql.(string)
	}
	sql = strings.NewReplacer("{before}", key.day.Add(-1).Lower().String(), "{from}", key.day.Lower().String(),
		"{to}", key.day.Add(1).Lower().String()).Replace(sql)
	stored, _ := loadByDay.LoadOrStore(key, sql)
	return stored.(string)
}

// loadKey names a day's read: the read alone (loadDaySQL), or the read with the claim of a
// first attempt (claimReadSQL), whose commit is prompt or not.
type loadKey struct {
	day           partition.Day
	claim, prompt bool
}

// loadByDay holds the texts of the day's reads by loadKey: at most three a day, a few kB each.
var loadByDay sync.Map

// loadMany reads the deliveries of ids, one or many, one query per UTC day of the ids (almost
// always one); an id this database does not hold (or does not show yet) is missing from the
// result.
func loadMany(ctx context.Context, pool *pgxpool.Pool, ids []string) (map[string]*row, error) {
	out := make(map[string]*row, len(ids))
	for day, of := range partition.ByDay(ids) {
		if err := loadDay(ctx, pool, day, of, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// loadDay reads the deliveries ids of day into out with that day's statement (loadStatement),
// prepared once per connection and run on its generic plan (delivery.QueryGeneric).
func loadDay(ctx context.Context, pool *pgxpool.Pool, day partition.Day, ids []string, out map[string]*row) error {
	at := time.Now()
	args := loadDayArgs(ids)
	err := delivery.QueryGeneric(ctx, pool, loadStatement(day), args[1:], func(rows pgx.Rows) error {
		for rows.Next() {
			r, err := scanRow(rows, at)
			if err != nil {
				return fmt.Errorf("scan: %w", err)
			}
			out[r.ID] = r
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load %d deliveries of %s (first %s): %w", len(ids), day, ids[0], err)
	}
	return nil
}

// loadDayArgs are the arguments of a day's loadStatement, the execution mode first.
func loadDayArgs(ids []string) []any {
	return []any{pgx.QueryExecModeCacheStatement, ids}
}

// expiredNow reports whether r has expired by now on the database clock: the clock read with
// the row, advanced by the monotonic time elapsed since.
func (r *row) expiredNow() bool {
	return r.ExpiresAt != nil && !r.DBNow.Add(time.Since(r.loadedAt)).Before(*r.ExpiresAt)
}

// scanRow scans a row of loadColumns, and then the columns after them into more.
func scanRow(s pgx.Row, loadedAt time.Time, more ...any) (*row, error) {
	r := &row{loadedAt: loadedAt}
	err := s.Scan(append([]any{&r.ID, &r.NotificationID, &r.Channel, &r.Priority,
		&r.Status, &r.Attempts, &r.ExpiresAt, &r.CreatedAt, &r.Due, &r.Expired, &r.DBNow,
		&r.ClientID, &r.UserID, &r.Template, &r.Category, &r.Payload, &r.To, &r.Content,
		&r.Email, &r.Phone, &r.WebhookURL, &r.Locale, &r.TimeZone,
		&r.QuietStart, &r.QuietEnd, &r.PushTokens, &r.LastOutcome, &r.LastProvider, &r.RedriveBase}, more...)...)
	return r, err
}
