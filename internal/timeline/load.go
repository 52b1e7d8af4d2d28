package timeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/partition"
)

// DB is what Load runs on: a *pgxpool.Pool, a *pgxpool.Conn, a *pgx.Conn or a pgx.Tx.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// notificationOf is the notification $1 names: $1 itself when it is a notification id, else
// the notification of delivery $1. Both branches are primary-key probes.
const notificationOf = `(SELECT id FROM notification WHERE id = $1
    UNION ALL SELECT notification_id FROM delivery WHERE id = $1 LIMIT 1)`

// selectDeliveries reads the notification and its deliveries, one row per delivery (one row
// with NULL delivery columns when routing left none). $2 restricts the answer to one API
// client; NULL: any client (herald trace, the console).
const selectDeliveries = `
SELECT n.id::text, n.client_id::text, n.user_id, n.template, n.category, n.priority, n.created_at,
       coalesce(n.traceparent, ''),
       d.id::text, d.channel, d.status, d.attempts, d.next_attempt_at, d.created_at, d.updated_at,
       d.provider, d.provider_message_id, d.transition_status, d.transition_at, d.redrive_id::text,
       coalesce(d.receipts, '[]')
  FROM notification n LEFT JOIN delivery d ON d.notification_id = n.id AND d.id >= $3 AND d.id < $4
 WHERE n.id = ` + notificationOf + ` AND ($2::uuid IS NULL OR n.client_id = $2::uuid)
 ORDER BY array_position(ARRAY['PUSH', 'EMAIL', 'SMS', 'WEBHOOK'], d.channel)`

// selectAttempts reads the attempt log of every delivery of the same notification; it goes
// in the same batch as selectDeliveries, so a timeline is one round trip.
const selectAttempts = `
SELECT a.delivery_id::text, a.attempt, a.started_at, a.finished_at, a.outcome, a.provider,
       a.provider_code, a.next_attempt_at, a.redrive_id::text, a.tokens_removed
  FROM delivery_attempt a JOIN delivery d ON d.id = a.delivery_id
 WHERE d.notification_id = ` + notificationOf + `
   AND d.id >= $2 AND d.id < $3 AND a.delivery_id >= $2 AND a.delivery_id < $3
 ORDER BY a.delivery_id, a.attempt`

// Load reads the timeline of the notification id, or of the notification of delivery id.
// clientID "" reads any client's notification; otherwise another client's reads as
// ErrNotFound.
func Load(ctx context.Context, db DB, id, clientID string) (*Timeline, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ErrNotFound
	}
	var client *string
	if clientID != "" {
		client = &clientID
	}
	b := &pgx.Batch{}
	lo, hi := days(id)
	b.Queue(selectDeliveries, id, client, lo, hi)
	attempts := map[string][]Attempt{}
	QueueAttemptLog(b, id, attempts)
	br := db.SendBatch(ctx, b)
	defer br.Close()

	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("read timeline of %s: %w", id, err)
	}
	var tl *Timeline
	for rows.Next() {
		if tl == nil {
			tl = &Timeline{Deliveries: []Delivery{}}
		}
		d, ok, err := scanDelivery(rows, tl)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("read timeline of %s: %w", id, err)
		}
		if ok {
			tl.Deliveries = append(tl.Deliveries, d)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read timeline of %s: %w", id, err)
	}
	if tl == nil {
		return nil, ErrNotFound
	}
	if err := br.Close(); err != nil { // runs QueueAttemptLog's callback
		return nil, fmt.Errorf("read attempts of %s: %w", id, err)
	}
	for i := range tl.Deliveries {
		d := &tl.Deliveries[i]
		d.AttemptLog = attempts[d.ID]
		if d.AttemptLog == nil {
			d.AttemptLog = []Attempt{}
		}
		d.Steps = steps(tl.AcceptedAt, d)
	}
	return tl, nil
}

type deliveryRow struct {
	id, channel, status    *string
	attempts               *int
	next, created, updated *time.Time
	provider, providerMsg  *string
	redrive                *string
	transitionStatus       []string
	transitionAt           []time.Time
	receipts               []Receipt
}

func scanDelivery(rows pgx.Rows, tl *Timeline) (Delivery, bool, error) {
	var (
		r            deliveryRow
		priority, tp string
	)
	if err := rows.Scan(&tl.NotificationID, &tl.ClientID, &tl.UserID, &tl.Template, &tl.Category, &priority,
		&tl.AcceptedAt, &tp, &r.id, &r.channel, &r.status, &r.attempts, &r.next, &r.created, &r.updated,
		&r.provider, &r.providerMsg, &r.transitionStatus, &r.transitionAt, &r.redrive, &r.receipts); err != nil {
		return Delivery{}, false, err
	}
	tl.Priority, tl.TraceID, tl.AcceptedAt = herald.Priority(priority), TraceID(tp), tl.AcceptedAt.UTC()
	if r.id == nil {
		return Delivery{}, false, nil
	}
	d := Delivery{
		ID: *r.id, Channel: herald.Channel(*r.channel), Status: herald.Status(*r.status), Attempts: *r.attempts,
		Provider: deref(r.provider), ProviderMessageID: deref(r.providerMsg), UpdatedAt: r.updated.UTC(),
		RedriveID: deref(r.redrive), Receipts: utcReceipts(r.receipts),
	}
	if !d.Status.Terminal() {
		next := r.next.UTC()
		d.NextAttemptAt = &next
	}
	d.Steps = []Step{{Status: herald.StatusPending, At: r.created.UTC()}}
	for i, s := range r.transitionStatus {
		if i < len(r.transitionAt) {
			d.Steps = append(d.Steps, Step{Status: herald.Status(s), At: r.transitionAt[i].UTC()})
		}
	}
	return d, true, nil
}

// QueueAttemptLog queues the read of the attempt log of every delivery of notification ref
// (or of the notification of delivery ref) on b; when the batch has run, into holds each
// delivery's attempts by delivery id, in attempt order. It lets a caller read the log in the
// round trip of its own queries (GET /api/notifications/{id} does).
func QueueAttemptLog(b *pgx.Batch, ref string, into map[string][]Attempt) {
	lo, hi := days(ref)
	b.Queue(selectAttempts, ref, lo, hi).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				a              Attempt
				did, stored    string
				provider, code *string
				redrive        *string
			)
			if err := rows.Scan(&did, &a.Attempt, &a.Started, &a.Finished, &stored, &provider, &code, &a.NextAttemptAt, &redrive, &a.TokensRemoved); err != nil {
				return err
			}
			a.Outcome, a.ErrorClass = attemptOutcome(stored)
			a.Provider, a.ProviderCode, a.RedriveID = deref(provider), deref(code), deref(redrive)
			a.Started, a.Finished = a.Started.UTC(), a.Finished.UTC()
			if a.NextAttemptAt != nil {
				u := a.NextAttemptAt.UTC()
				a.NextAttemptAt = &u
			}
			into[did] = append(into[did], a)
		}
		return rows.Err()
	})
}

// Resolve turns what an operator has in hand into a notification id: a notification id or a
// delivery id as is, or an idempotency key of client (an api_client id or name; keys are
// unique per client only).
func Resolve(ctx context.Context, db DB, ref, client string) (string, error) {
	if client == "" {
		if _, err := uuid.Parse(ref); err != nil {
			return "", fmt.Errorf("%q is no notification or delivery id; an idempotency key needs its client: %w", ref, ErrNotFound)
		}
		return ref, nil
	}
	var clientID *string // nil: client is a name
	if _, err := uuid.Parse(client); err == nil {
		clientID = &client
	}
	var id string
	err := db.QueryRow(ctx, selectByIdempotencyKey, clientID, client, ref).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("look up idempotency key of client %s: %w", client, err)
	}
	return id, nil
}

// selectByIdempotencyKey finds a notification by client and key. The client is the id $1,
// or when $1 is NULL the name $2; a name several clients share matches none of them
// (count = 1), so that a key never resolves to another client's notification.
const selectByIdempotencyKey = `
WITH c AS (
    SELECT id FROM api_client WHERE id = $1::uuid OR ($1 IS NULL AND name = $2))
SELECT k.notification_id::text FROM idempotency_key k, c
 WHERE k.client_id = c.id AND k.idempotency_key = $3 AND (SELECT count(*) FROM c) = 1`

// days bounds the deliveries a look-up by ref may read to the partitions they can be in:
// delivery and delivery_attempt are partitioned by the day of the delivery id (docs/
// architecture.md), a delivery is made with its notification, so in the notification's day
// or, a moment after midnight, the next; ref is a notification id or a delivery id, so the
// deliveries lie within a day before to two days after ref's day, and the look-up reads
// those partitions only.
func days(ref string) (lo, hi uuid.UUID) {
	id, err := uuid.Parse(ref)
	if err != nil {
		return uuid.Nil, uuid.Max
	}
	d := partition.DayOfID(id)
	return d.Add(-1).Lower(), d.Add(2).Lower()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// utcReceipts returns rs with their times in UTC, [] for none.
func utcReceipts(rs []Receipt) []Receipt {
	out := make([]Receipt, len(rs))
	for i, r := range rs {
		r.At, r.ReceivedAt = r.At.UTC(), r.ReceivedAt.UTC()
		out[i] = r
	}
	return out
}
