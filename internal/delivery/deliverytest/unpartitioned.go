package deliverytest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/recipient"
)

// unpartitionedSQL writes one notification, its SENT SMS delivery and the attempt that sent
// it, as herald wrote them before migration 00060 (the idempotency key on the notification
// row). It is for tests of that migration only: on today's schema, use Insert.
const unpartitionedSQL = `
WITH n AS (
    INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template, category,
                              priority, response, created_at)
    VALUES ($1, $2, $3, '\x01', 1, 'otp', 'security', 'NORMAL', $5, $6)
    RETURNING id
), d AS (
    INSERT INTO delivery (id, notification_id, channel, priority, status, attempts, next_attempt_at,
                          created_at, sent_at)
    SELECT $4, n.id, 'SMS', 'NORMAL', 'SENT', 1, $6, $6, $6 FROM n
    RETURNING id
)
INSERT INTO delivery_attempt (delivery_id, attempt, started_at, finished_at, outcome, provider)
SELECT d.id, 1, $6, $6, 'SENT', 'log' FROM d`

// Unpartitioned is a notification written by Unpartitioned.
type Unpartitioned struct {
	NotificationID, DeliveryID uuid.UUID
	IdempotencyKey             string
}

// InsertUnpartitioned writes one notification made at each of times into a database
// migrated to a version before 00060, with ids of those times, and returns them.
func InsertUnpartitioned(t testing.TB, pool *pgxpool.Pool, clientID string, times []time.Time) []Unpartitioned {
	t.Helper()
	out := make([]Unpartitioned, 0, len(times))
	for _, at := range times {
		nid, err := IDAt(at)
		if err != nil {
			t.Fatal(err)
		}
		did, err := IDAt(at)
		if err != nil {
			t.Fatal(err)
		}
		u := Unpartitioned{NotificationID: nid, DeliveryID: did, IdempotencyKey: "before-" + nid.String()}
		resp, err := json.Marshal(recipient.Accepted{ID: nid.String(), Suppressed: []recipient.Suppressed{},
			Deliveries: []recipient.AcceptedDelivery{{ID: did.String(), Channel: herald.ChannelSMS, Status: herald.StatusPending}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(context.Background(), unpartitionedSQL, nid, clientID, u.IdempotencyKey, did, resp, at); err != nil {
			t.Fatalf("insert notification of %s before the partitions: %v", at, err)
		}
		out = append(out, u)
	}
	return out
}

// IDAt returns a UUIDv7 made at t: a fresh one with its time replaced, so that a test can
// write rows of a past or future day (delivery and notification are partitioned by the day
// of their id).
func IDAt(t time.Time) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return id, fmt.Errorf("new UUIDv7: %w", err)
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixMilli()))
	copy(id[:6], b[2:])
	return id, nil
}
