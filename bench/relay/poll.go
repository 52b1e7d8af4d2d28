package relay

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
)

// pollSQL is the seed's query on herald's schema. The seed stores priority as a SMALLINT
// (0 HIGH, 1 NORMAL, 2 LOW) and orders by it; herald stores the name ('HIGH', 'NORMAL',
// 'LOW'), whose text order would put LOW before NORMAL, so the rank is spelled out, in the
// same expression as the seed's index (seedIndexSQL), so that the poll walks that index and
// stops after Batch rows as the seed's does. The columns beyond the seed's id and priority
// are what herald's record carries.
const pollSQL = `
SELECT id::text, notification_id::text, channel, priority, attempts, coalesce(traceparent, '')
  FROM delivery
 WHERE status = 'PENDING' AND next_attempt_at <= now()
 ORDER BY CASE priority WHEN 'HIGH' THEN 0 WHEN 'NORMAL' THEN 1 ELSE 2 END, next_attempt_at
 LIMIT $1
   FOR UPDATE SKIP LOCKED`

// seedIndexSQL is the seed's idx_delivery_due, ON delivery (priority, next_attempt_at) WHERE
// status = 'PENDING', on herald's text priority. It belongs to the baseline, not to herald's
// schema: InstallSeedIndex adds it to the polling relay's scratch database. Without it the
// poll sorts every due PENDING row for its top Batch under FOR UPDATE (no top-N sort below
// LockRows): 0.75 s per poll at a 100,000-row backlog here, a cost the seed's relay does not
// have.
const seedIndexSQL = `
CREATE INDEX IF NOT EXISTS seed_delivery_due
    ON delivery ((CASE priority WHEN 'HIGH' THEN 0 WHEN 'NORMAL' THEN 1 ELSE 2 END), next_attempt_at)
 WHERE status = 'PENDING'`

// InstallSeedIndex creates the seed's index (seedIndexSQL) the Poller's query walks.
func InstallSeedIndex(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, seedIndexSQL); err != nil {
		return fmt.Errorf("create the seed's delivery index: %w", err)
	}
	return nil
}

// queueSQL is the seed's per-row update, run after Kafka acknowledged the row's record.
const queueSQL = `UPDATE delivery SET status = 'QUEUED' WHERE id = $1::uuid`

// polledRow is one row a poll locked.
type polledRow struct {
	id, notificationID string
	channel            herald.Channel
	priority           herald.Priority
	attempts           int
	traceparent        string
}

// poll is one run of the seed's @Scheduled @Transactional relay(): it returns how many rows
// it published and marked QUEUED. On an error the transaction rolls back and the rows stay
// PENDING (those already sent are sent again by a later poll: at least once).
func (p *Poller) poll(ctx context.Context) (int, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("poll: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, pollSQL, p.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("poll: select due deliveries: %w", err)
	}
	var due []polledRow
	for rows.Next() {
		var r polledRow
		if err := rows.Scan(&r.id, &r.notificationID, &r.channel, &r.priority, &r.attempts, &r.traceparent); err != nil {
			rows.Close()
			return 0, fmt.Errorf("poll: scan due delivery: %w", err)
		}
		due = append(due, r)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("poll: select due deliveries: %w", err)
	}
	for _, r := range due {
		rec, err := p.record(r)
		if err != nil {
			return 0, err
		}
		if err := p.kafka.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return 0, fmt.Errorf("poll: send delivery %s: %w", r.id, err)
		}
		if _, err := tx.Exec(ctx, queueSQL, r.id); err != nil {
			return 0, fmt.Errorf("poll: mark delivery %s queued: %w", r.id, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("poll: commit %d deliveries: %w", len(due), err)
	}
	return len(due), nil
}

// record is the Kafka record herald's relay writes for r (cdc/publish.go): key and
// herald-delivery-id header the delivery id, value the DeliveryMessage, herald-attempt the
// attempt the record is for, traceparent when the row has one.
func (p *Poller) record(r polledRow) (*kgo.Record, error) {
	value, err := herald.DeliveryMessage{
		DeliveryID: r.id, NotificationID: r.notificationID, Channel: r.channel,
		Priority: r.priority, Attempts: r.attempts,
	}.Marshal()
	if err != nil {
		return nil, fmt.Errorf("poll: encode delivery %s: %w", r.id, err)
	}
	rec := &kgo.Record{
		Topic: p.cfg.Topics[r.priority],
		Key:   []byte(r.id),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: herald.HeaderDeliveryID, Value: []byte(r.id)},
			{Key: herald.HeaderAttempt, Value: []byte(strconv.Itoa(r.attempts + 1))},
		},
	}
	if r.traceparent != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: herald.HeaderTraceparent, Value: []byte(r.traceparent)})
	}
	return rec, nil
}
