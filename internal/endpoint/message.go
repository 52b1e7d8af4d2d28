package endpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
)

// Message is one event owed to one endpoint (a webhook_message row).
type Message struct {
	EndpointID string
	EventID    string
	EventType  herald.EventType
	OccurredAt time.Time
	// Body is the CloudEvents JSON POSTed on every attempt.
	Body []byte
	// Attempts made so far; AttemptBase is Attempts when the message was last replayed, so
	// that Attempts-AttemptBase is the position in the retry schedule.
	Attempts, AttemptBase int
	// ClientID and URL are the endpoint's: whose secret signs, and where the POST goes.
	ClientID, URL string
}

// Try is the number of the next attempt within the retry schedule: 0 for the first.
func (m *Message) Try() int { return m.Attempts - m.AttemptBase }

// messageColumnsOf lists what scanMessages reads, from message alias m joined with its
// endpoint as e.
func messageColumnsOf(m string) string {
	return m + ".endpoint_id::text, " + m + ".event_id::text, " + m + ".event_type, " + m + ".occurred_at, " +
		m + ".body, " + m + ".attempts, " + m + ".attempt_base, e.client_id::text, e.url"
}

func scanMessages(rows pgx.Rows) ([]Message, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) {
		var m Message
		err := r.Scan(&m.EndpointID, &m.EventID, &m.EventType, &m.OccurredAt, &m.Body, &m.Attempts, &m.AttemptBase, &m.ClientID, &m.URL)
		return m, err
	})
}

// enqueueSQL matches a batch of events against the enabled endpoints of each event's client
// (an empty filter takes every type) and writes one message per match, claimed by the writer
// for lease, in one statement. A message that exists already (the Kafka record came again
// after a crash, or a replay wrote it) is left alone and not returned: whoever holds it, or
// the sweeper, sends it. An endpoint receives the events read after it was created.
var enqueueSQL = `
WITH ev AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::bytea[]) AS x(id, client_id, type, occurred_at, body)
), m AS (
    INSERT INTO webhook_message (endpoint_id, event_id, event_type, occurred_at, body, locked_until)
    SELECT e.id, ev.id, ev.type, ev.occurred_at, ev.body, now() + make_interval(secs => $6)
    FROM ev JOIN webhook_endpoint e ON e.client_id = ev.client_id AND e.disabled_at IS NULL
        AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types))
    ORDER BY ev.id, e.id
    ON CONFLICT (endpoint_id, event_id) DO NOTHING
    RETURNING endpoint_id, event_id, event_type, occurred_at, body, attempts, attempt_base
)
SELECT ` + messageColumnsOf("m") + ` FROM m JOIN webhook_endpoint e ON e.id = m.endpoint_id`

// Enqueue records the messages that evs owe to endpoints, PENDING and claimed by the caller
// for lease, and returns those it wrote. Body of each event must be set.
func Enqueue(ctx context.Context, db DB, evs []Event, bodies [][]byte, lease time.Duration) ([]Message, error) {
	n := len(evs)
	ids, clients, types, at := make([]string, n), make([]string, n), make([]string, n), make([]time.Time, n)
	for i, e := range evs {
		ids[i], clients[i], types[i], at[i] = e.ID, e.ClientID, string(e.Type), e.Time
	}
	rows, err := db.Query(ctx, enqueueSQL, ids, clients, types, at, bodies, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("enqueue webhook messages of %d events: %w", n, err)
	}
	out, err := scanMessages(rows)
	if err != nil {
		return nil, fmt.Errorf("enqueue webhook messages of %d events: %w", n, err)
	}
	return out, nil
}

// claimDueSQL takes the due PENDING messages of enabled endpoints that nobody holds (never
// claimed, handed back, or held by a worker that died and whose claim ran out), oldest due
// first. SKIP LOCKED lets several events processes sweep at once.
var claimDueSQL = `
UPDATE webhook_message m SET locked_until = now() + make_interval(secs => $2)
FROM (
    SELECT w.endpoint_id, w.event_id FROM webhook_message w
    JOIN webhook_endpoint d ON d.id = w.endpoint_id AND d.disabled_at IS NULL
    WHERE w.status = 'PENDING' AND w.next_attempt_at <= now()
      AND (w.locked_until IS NULL OR w.locked_until < now())
    ORDER BY w.next_attempt_at LIMIT $1
    FOR UPDATE OF w SKIP LOCKED
) due, webhook_endpoint e
WHERE m.endpoint_id = due.endpoint_id AND m.event_id = due.event_id
    AND e.id = m.endpoint_id
RETURNING ` + messageColumnsOf("m")

// ClaimDue claims up to limit due messages for lease.
func ClaimDue(ctx context.Context, db DB, limit int, lease time.Duration) ([]Message, error) {
	rows, err := db.Query(ctx, claimDueSQL, limit, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim due webhook messages: %w", err)
	}
	out, err := scanMessages(rows)
	if err != nil {
		return nil, fmt.Errorf("claim due webhook messages: %w", err)
	}
	return out, nil
}

const releaseSQL = `
UPDATE webhook_message SET locked_until = NULL
WHERE endpoint_id = $1 AND event_id = $2 AND status = 'PENDING' AND attempts = $3`

// Release hands a claimed message back unsent (its worker was full or is stopping): the next
// sweep takes it.
func Release(ctx context.Context, db DB, m Message) error {
	if _, err := db.Exec(ctx, releaseSQL, m.EndpointID, m.EventID, m.Attempts); err != nil {
		return fmt.Errorf("release webhook message %s of endpoint %s: %w", m.EventID, m.EndpointID, err)
	}
	return nil
}

const extendSQL = `
UPDATE webhook_message SET locked_until = now() + make_interval(secs => $4)
WHERE endpoint_id = $1 AND event_id = $2 AND status = 'PENDING' AND attempts = $3`

// Extend renews the caller's claim on a message it is about to send after holding it for a
// while; false means the message moved meanwhile (another worker took it over, or it was
// deleted) and must not be sent.
func Extend(ctx context.Context, db DB, m Message, lease time.Duration) (bool, error) {
	tag, err := db.Exec(ctx, extendSQL, m.EndpointID, m.EventID, m.Attempts, lease.Seconds())
	if err != nil {
		return false, fmt.Errorf("extend claim on webhook message %s of endpoint %s: %w", m.EventID, m.EndpointID, err)
	}
	return tag.RowsAffected() == 1, nil
}
