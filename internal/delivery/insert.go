package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald"
)

// Notification is an accepted notification and the deliveries it gets: one per channel that
// routing left.
type Notification struct {
	ID             uuid.UUID
	ClientID       string // api_client.id
	IdempotencyKey string
	RequestHash    []byte
	UserID         int64
	Template       string
	Category       string
	Payload        []byte // JSON object; nil: {}
	Recipient      []byte // JSON, the inline recipient override; nil: none
	Priority       herald.Priority
	Traceparent    string // "": none
	SendAt         *time.Time
	ExpiresAt      *time.Time
	Response       []byte // the 202 answer, replayed for a repeated Idempotency-Key
	Deliveries     []New
	// NextAttemptAt is when the deliveries are first due (sendAt, quiet hours); nil: now().
	NextAttemptAt *time.Time
}

// New is a delivery row to create.
type New struct {
	ID      uuid.UUID
	Channel herald.Channel
}

// insertSQL writes a notification and its delivery rows, PENDING, in one statement. It
// first claims the Idempotency-Key in idempotency_key (notification is partitioned by day, so
// the key's unique constraint lives in a table of its own); the notification insert reads
// that insert's RETURNING, and the delivery insert the notification insert's. When the key is
// already taken (ON CONFLICT DO NOTHING: a concurrent request with the same key waits here
// for the other transaction and then inserts nothing) no notification or delivery row is
// written either, and the count is 0: the "condition" of this transition is that the key is
// free.
//
// next_attempt_at is $17 for deliveries due later (sendAt, quiet hours: the sweeper publishes
// them when it passes); NULL means now(), the database clock, which equals the row's
// updated_at, so the relay publishes the row as soon as the transaction commits. Ids arrive
// as binary uuids (pgtype.UUID), which pgx encodes without parsing text.
const insertSQL = `
WITH k AS (
    INSERT INTO idempotency_key (client_id, idempotency_key, notification_id, request_hash)
    VALUES ($2, $3, $1, $4)
    ON CONFLICT (client_id, idempotency_key) DO NOTHING
    RETURNING notification_id
), n AS (
    INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template,
                              category, payload, recipient, priority, traceparent, send_at,
                              expires_at, response)
    SELECT k.notification_id, $2::uuid, $3::text, $4::bytea, $5::bigint, $6::text, $7::text,
           coalesce($8::jsonb, '{}'), $9::jsonb, $10::text, $11::text, $12::timestamptz,
           $13::timestamptz, $14::jsonb
    FROM k
    RETURNING id, priority, expires_at, traceparent
), d AS (
    INSERT INTO delivery (id, notification_id, channel, priority, expires_at, traceparent, next_attempt_at)
    SELECT u.id, n.id, u.channel, n.priority, n.expires_at, n.traceparent, coalesce($17::timestamptz, now())
    FROM n CROSS JOIN unnest($15::uuid[], $16::text[]) AS u (id, channel)
)
SELECT count(*) FROM n`

// QueueInsert queues insertSQL for n on b; when the batch has run, *inserted says whether
// the notification was written (false: its Idempotency-Key was taken, nothing was written).
// It lets a caller send several inserts in one round trip (deliverytest's fixtures do); Insert
// runs one on its own, and is what ingest's accept calls.
func QueueInsert(b *pgx.Batch, n Notification, inserted *bool) {
	queueInsert(b, insertSQL, n, inserted)
}

// queueInsert queues sql, insertSQL or insertPromptSQL, for n on b.
func queueInsert(b *pgx.Batch, sql string, n Notification, inserted *bool) {
	b.Queue(sql, insertArgs(n)...).QueryRow(func(row pgx.Row) error {
		var count int
		if err := row.Scan(&count); err != nil {
			return fmt.Errorf("insert notification %s: %w", n.ID, err)
		}
		*inserted = count == 1
		return nil
	})
}

// insertArgs are the arguments of insertSQL for n.
func insertArgs(n Notification) []any {
	ids := make([]pgtype.UUID, len(n.Deliveries))
	channels := make([]string, len(n.Deliveries))
	for i, d := range n.Deliveries {
		ids[i], channels[i] = pgtype.UUID{Bytes: d.ID, Valid: true}, string(d.Channel)
	}
	var recipient, payload any
	if n.Recipient != nil {
		recipient = n.Recipient
	}
	if n.Payload != nil {
		payload = n.Payload
	}
	return []any{pgtype.UUID{Bytes: n.ID, Valid: true}, n.ClientID, n.IdempotencyKey, n.RequestHash, n.UserID, n.Template,
		n.Category, payload, recipient, string(n.Priority), nullable(n.Traceparent), n.SendAt,
		n.ExpiresAt, n.Response, ids, channels, n.NextAttemptAt}
}

// insertPromptSQL is insertSQL committing without waiting for its WAL flush (promptCondition,
// as the prompt claim does): once the statement has returned, its rows are visible to every
// session, dispatch's claim included, but they are durable only once the WAL has been
// flushed past its commit record (InsertPromptDurable).
const insertPromptSQL = insertSQL + `
 WHERE ` + promptCondition

// awaitDurableSQL is a transaction of its own that writes one record to the WAL, a
// logical-decoding message with no table behind it, so that its commit (at the session's
// synchronous_commit, on unless an operator says otherwise) waits until the WAL is flushed
// past its own commit record, and with it past every commit record before it. The relay's
// pgoutput stream does not ask for messages (cdc/stream.go), so the walsender skips the
// message and its transaction, which has no change of a published table.
const awaitDurableSQL = `SELECT pg_logical_emit_message(true, 'herald.durable', '')`

// InsertPromptDurable is Insert in two transactions sent together, so that the notification
// is visible before it is durable: the insert commits without waiting for its WAL flush
// (insertPromptSQL), then awaitDurableSQL waits for the flush. visible runs between the two,
// once the insert's answer is in and only if it wrote the notification (false: the key was
// taken): the rows are then visible to every session, dispatch's claim included, and not yet
// durable. InsertPromptDurable returns once they are, or with the error that kept them from
// being so: a crash of the database server in between loses them, so nothing may tell the
// caller that the notification was accepted before InsertPromptDurable has returned nil
// (ingest's HIGH accept, docs/architecture.md, "Published before its flush, answered after it").
//
// The two statements go out in one pipeline, each with its own Sync (its own implicit
// transaction), in one write: the server runs the second right after the first without
// waiting for the client, which reads the first answer, runs visible, and then waits for the
// second. Sent one after the other they cost the backend one more wake-up, which under a
// saturated CPU is a wait in the run queue.
func InsertPromptDurable(ctx context.Context, conn *pgx.Conn, n Notification, visible func()) (bool, error) {
	sd, err := conn.Prepare(ctx, insertPromptSQL, insertPromptSQL)
	if err != nil {
		return false, fmt.Errorf("prepare the prompt insert: %w", err)
	}
	var q pgx.ExtendedQueryBuilder
	if err := q.Build(conn.TypeMap(), sd, insertArgs(n)); err != nil {
		return false, fmt.Errorf("prompt insert arguments: %w", err)
	}
	p := conn.PgConn().StartPipeline(ctx)
	p.SendQueryStatement(sd, q.ParamValues, q.ParamFormats, q.ResultFormats)
	p.SendPipelineSync()
	p.SendQueryParams(awaitDurableSQL, nil, nil, nil, nil)
	p.SendPipelineSync()
	inserted, err := func() (bool, error) {
		if err := p.Flush(); err != nil {
			return false, err
		}
		var count int64
		if err := pipelineResult(p, func(rr *pgconn.ResultReader) error {
			if !rr.NextRow() {
				return errors.New("no count")
			}
			return conn.TypeMap().Scan(pgtype.Int8OID, rr.FieldDescriptions()[0].Format, rr.Values()[0], &count)
		}); err != nil {
			return false, fmt.Errorf("prompt insert: %w", err)
		}
		if count == 1 {
			visible()
		}
		if err := pipelineResult(p, nil); err != nil {
			return false, fmt.Errorf("wait for the WAL flush: %w", err)
		}
		return count == 1, nil
	}()
	if cerr := p.Close(); err == nil && cerr != nil {
		return false, fmt.Errorf("prompt insert pipeline: %w", cerr)
	}
	return inserted, err
}

// pipelineResult reads the next statement's answer from p (read, when not nil, reads its rows)
// and then the Sync after it.
func pipelineResult(p *pgconn.Pipeline, read func(*pgconn.ResultReader) error) error {
	res, err := p.GetResults()
	if err != nil {
		return err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return fmt.Errorf("pipeline: %T where a statement's result was due", res)
	}
	var readErr error
	if read != nil {
		readErr = read(rr)
	}
	if _, err := rr.Close(); err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	if res, err = p.GetResults(); err != nil {
		return err
	}
	if _, ok := res.(*pgconn.PipelineSync); !ok {
		return fmt.Errorf("pipeline: %T where a Sync was due", res)
	}
	return nil
}

// AwaitDurable returns once every transaction that committed before the call, in any
// session, is durable: the WAL is flushed past its commit record (awaitDurableSQL). A replay
// of a HIGH request calls it, since what it replays may be an InsertPromptDurable in flight.
func AwaitDurable(ctx context.Context, db DB) error {
	if _, err := db.Exec(ctx, awaitDurableSQL); err != nil {
		return fmt.Errorf("wait for the WAL flush: %w", err)
	}
	return nil
}

// Insert writes n and its deliveries (insertSQL). It returns false when the Idempotency-Key
// was taken and nothing was written.
func Insert(ctx context.Context, db DB, n Notification) (bool, error) {
	b := &pgx.Batch{}
	var inserted bool
	QueueInsert(b, n, &inserted)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	return inserted, nil
}
