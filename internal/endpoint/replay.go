package endpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// replayBatch is how many outbox events one replay statement reads and writes.
const replayBatch = 1000

// replayEventsSQL reads the client's events since a time from the outbox, in id order (ids
// are UUIDv7: the lower bound on id prunes the day partitions before since), one batch after
// the last id of the previous batch.
const replayEventsSQL = `
SELECT id::text, type, client_id::text, delivery_id::text, occurred_at, data
FROM delivery_event
WHERE client_id = $1 AND id > $2 AND occurred_at >= $3 AND (cardinality($4::text[]) = 0 OR type = ANY($4))
ORDER BY id LIMIT $5`

// replaySQL owes each event to the endpoint again: a new message, or an existing one (sent,
// dropped or waiting) back to PENDING and due now, its retry schedule started afresh. It keeps
// the event id, so a receiver that remembers webhook-id sees the same event again.
const replaySQL = `
INSERT INTO webhook_message (endpoint_id, event_id, event_type, occurred_at, body)
SELECT $1, v, t, o, b FROM unnest($2::uuid[], $3::text[], $4::timestamptz[], $5::bytea[]) AS x(v, t, o, b)
ON CONFLICT (endpoint_id, event_id) DO UPDATE
SET status = 'PENDING', attempt_base = webhook_message.attempts, next_attempt_at = now(),
    finished_at = NULL, locked_until = NULL
WHERE webhook_message.status <> 'PENDING'`

// Replay owes endpoint e every event of its client's notifications that occurred at or after
// since and that its filter takes, and returns how many events it read. The outbox keeps the
// events of the retention period.
func Replay(ctx context.Context, db DB, e Endpoint, since time.Time) (int, error) {
	types := make([]string, len(e.EventTypes))
	for i, t := range e.EventTypes {
		types[i] = string(t)
	}
	after, total := minUUIDv7(since), 0
	for {
		evs, err := replayEvents(ctx, db, e.ClientID, after, since, types)
		if err != nil {
			return total, fmt.Errorf("replay webhook endpoint %s: %w", e.ID, err)
		}
		if len(evs) == 0 {
			return total, nil
		}
		if err := owe(ctx, db, e.ID, evs); err != nil {
			return total, fmt.Errorf("replay webhook endpoint %s: %w", e.ID, err)
		}
		total += len(evs)
		after = uuid.MustParse(evs[len(evs)-1].ID)
		if len(evs) < replayBatch {
			return total, nil
		}
	}
}

func replayEvents(ctx context.Context, db DB, clientID string, after uuid.UUID, since time.Time, types []string) ([]Event, error) {
	rows, err := db.Query(ctx, replayEventsSQL, clientID, after, since, types, replayBatch)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var ev Event
		var data []byte
		err := r.Scan(&ev.ID, &ev.Type, &ev.ClientID, &ev.Subject, &ev.Time, &data)
		ev.Data = data
		return ev, err
	})
}

func owe(ctx context.Context, db DB, endpointID string, evs []Event) error {
	n := len(evs)
	ids, types, at, bodies := make([]string, n), make([]string, n), make([]time.Time, n), make([][]byte, n)
	for i := range evs {
		b, err := evs[i].Body()
		if err != nil {
			return err
		}
		ids[i], types[i], at[i], bodies[i] = evs[i].ID, string(evs[i].Type), evs[i].Time, b
	}
	_, err := db.Exec(ctx, replaySQL, endpointID, ids, types, at, bodies)
	return err
}

// minUUIDv7 is the smallest UUIDv7 of the millisecond before t: every id made at or after t
// is above it.
func minUUIDv7(t time.Time) uuid.UUID {
	var u uuid.UUID
	ms := uint64(max(t.UnixMilli()-1, 0))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ms)
	copy(u[:6], b[2:])
	u[6] = 0x70
	u[8] = 0x80
	return u
}
