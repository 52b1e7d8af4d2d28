package deliverytest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// cloneSQL copies notification $1 and its deliveries $2 times in one statement, with new
// ids and idempotency keys and every other column as the original has it. A new id keeps
// the original's first 48 bits (its UUIDv7 time), the version 7 and takes the rest from a
// random uuid, so that the copies land in the original's daily partition. It is the volume
// fixture: the original went through the real insert (and placement), so the copies have
// the shape the transitions give, at the speed of INSERT ... SELECT.
const cloneSQL = `
WITH n AS (
    INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template, category,
                              payload, recipient, priority, traceparent, send_at, expires_at, response)
    SELECT (substr(replace(id::text, '-', ''), 1, 12) || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid, client_id, idempotency_key || '.' || g, request_hash, user_id, template, category,
           payload, recipient, priority, traceparent, send_at, expires_at, response
      FROM notification, generate_series(1, $2::int) AS g
     WHERE id = $1::uuid
 RETURNING id)
INSERT INTO delivery (id, notification_id, channel, priority, status, attempts, next_attempt_at, expires_at, traceparent)
SELECT (substr(replace(d.id::text, '-', ''), 1, 12) || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid, n.id, d.channel, d.priority, d.status, d.attempts, d.next_attempt_at, d.expires_at, d.traceparent
  FROM n CROSS JOIN delivery d
 WHERE d.notification_id = $1::uuid`

// Backlog inserts n deliveries like s: one through Insert, n-1 cloned from it in one
// statement, all in one transaction. It returns the id of the first. The clones share the
// first row's next_attempt_at and expires_at.
func Backlog(t testing.TB, db Beginner, n int, s Spec) string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatalf("insert backlog: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	id := One(t, tx, s)
	if n > 1 {
		if _, err := tx.Exec(ctx, cloneSQL, notificationOf(t, tx, id), n-1); err != nil {
			t.Fatalf("clone delivery %s %d times: %v", id, n-1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("insert backlog: %v", err)
	}
	return id
}

// notificationOf returns the notification id of delivery id.
func notificationOf(t testing.TB, tx pgx.Tx, id string) string {
	t.Helper()
	var nid string
	if err := tx.QueryRow(context.Background(), `SELECT notification_id::text FROM delivery WHERE id = $1`, id).Scan(&nid); err != nil {
		t.Fatalf("read notification of delivery %s: %v", id, err)
	}
	return nid
}
