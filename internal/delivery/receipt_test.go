package delivery_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// receiptRow is what a receipt test reads back of a delivery.
type receiptRow struct {
	Status    herald.Status
	Receipts  []map[string]any
	UpdatedAt time.Time
}

func readReceipts(t *testing.T, pool *pgxpool.Pool, id string) receiptRow {
	t.Helper()
	var r receiptRow
	var raw []byte
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT status, coalesce(receipts, '[]'), updated_at FROM delivery WHERE id = $1`, id).Scan(&r.Status, &raw, &r.UpdatedAt))
	require.NoError(t, json.Unmarshal(raw, &r.Receipts))
	return r
}

func held(t *testing.T, pool *pgxpool.Pool, id string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM receipt_hold WHERE delivery_id = $1`, id).Scan(&n))
	return n
}

func eventsOf(t *testing.T, pool *pgxpool.Pool, id string, typ herald.EventType) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery_event WHERE delivery_id = $1 AND type = $2`,
		id, typ).Scan(&n))
	return n
}

func receipt(id, status string, result herald.Status) delivery.Receipt {
	return delivery.Receipt{DeliveryID: id, Provider: "sms:twilio", Status: status, Result: result, At: time.Now().UTC()}
}

func sendOutcome() delivery.Outcome {
	return delivery.Outcome{Status: herald.StatusSent, AttemptClass: herald.AttemptSent, Provider: "sms:twilio", ProviderID: "SM1"}
}

// TestReceiptRefinesSentOnly: SENT → DELIVERED from the first final receipt; the same
// receipt again changes nothing (not even updated_at), a later UNDELIVERED is only logged
// (nothing moves back), a step on the way is logged, and a delivery that was never sent
// ignores receipts.
func TestReceiptRefinesSentOnly(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	id := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusSent, Attempts: 1})
	apply := func(r delivery.Receipt) delivery.ReceiptOutcome {
		o, err := delivery.ApplyReceipt(ctx, pool, r, time.Minute)
		require.NoError(t, err)
		return o
	}

	require.Equal(t, delivery.ReceiptLogged, apply(receipt(id, "sent", "")))
	require.Equal(t, herald.StatusSent, readReceipts(t, pool, id).Status, "a step on the way moves nothing")
	require.Equal(t, delivery.ReceiptApplied, apply(receipt(id, "delivered", herald.StatusDelivered)))
	after := readReceipts(t, pool, id)
	require.Equal(t, herald.StatusDelivered, after.Status)
	require.Len(t, after.Receipts, 2)
	require.Equal(t, "delivered", after.Receipts[1]["status"])
	require.Equal(t, true, after.Receipts[1]["applied"])

	require.Equal(t, delivery.ReceiptDuplicate, apply(receipt(id, "delivered", herald.StatusDelivered)))
	require.Equal(t, after, readReceipts(t, pool, id), "a duplicate changes nothing")
	require.Equal(t, 1, eventsOf(t, pool, id, herald.EventDelivered), "the transition's event, once")

	late := receipt(id, "undelivered", herald.StatusUndelivered)
	late.Code = "30005"
	require.Equal(t, delivery.ReceiptLogged, apply(late))
	r := readReceipts(t, pool, id)
	require.Equal(t, herald.StatusDelivered, r.Status, "nothing moves back")
	require.Len(t, r.Receipts, 3)
	require.Equal(t, false, r.Receipts[2]["applied"])
	require.Zero(t, eventsOf(t, pool, id, herald.EventUndelivered), "a late receipt writes no event")

	bounced := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusSent, Attempts: 1})
	bounce := receipt(bounced, "undelivered", herald.StatusUndelivered)
	bounce.Code = "30005"
	require.Equal(t, delivery.ReceiptApplied, apply(bounce))
	require.Equal(t, 1, eventsOf(t, pool, bounced, herald.EventUndelivered))
	var code string
	require.NoError(t, pool.QueryRow(ctx, `SELECT data->'error'->>'code' FROM delivery_event WHERE delivery_id = $1 AND type = $2`,
		bounced, herald.EventUndelivered).Scan(&code))
	require.Equal(t, "30005", code, "the event names the provider's code")

	failed := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusFailed, Attempts: 1})
	require.Equal(t, delivery.ReceiptIgnored, apply(receipt(failed, "delivered", herald.StatusDelivered)))
	require.Equal(t, herald.StatusFailed, readReceipts(t, pool, failed).Status)
	require.Zero(t, held(t, pool, failed))
}

// TestReceiptBeforeSendIsHeldThenApplied: a receipt that beats the send's commit is held and
// applied when the send is recorded (ApplyHeld right after RecordBatch), in event order; an
// unknown id is held and dropped at the end of its hold.
func TestReceiptBeforeSendIsHeldThenApplied(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})

	early := receipt(id, "sent", "")
	final := receipt(id, "delivered", herald.StatusDelivered)
	final.At = early.At.Add(time.Second)
	for _, r := range []delivery.Receipt{final, early, final} {
		o, err := delivery.ApplyReceipt(ctx, pool, r, time.Minute)
		require.NoError(t, err)
		require.Equal(t, delivery.ReceiptHeld, o)
	}
	require.Equal(t, 2, held(t, pool, id), "a duplicate is held once")
	require.Equal(t, herald.StatusSending, readReceipts(t, pool, id).Status)

	ok, err := delivery.Record(ctx, pool, id, 1, time.Now(), sendOutcome())
	require.NoError(t, err)
	require.True(t, ok)
	applied, err := delivery.ApplyHeld(ctx, pool, []string{id})
	require.NoError(t, err)
	require.Len(t, applied, 2)
	require.Equal(t, delivery.ReceiptLogged, applied[0].Outcome, "the earlier event first")
	require.Equal(t, delivery.ReceiptApplied, applied[1].Outcome)
	r := readReceipts(t, pool, id)
	require.Equal(t, herald.StatusDelivered, r.Status)
	require.Len(t, r.Receipts, 2)
	require.Zero(t, held(t, pool, id))

	unknown := uuid.Must(uuid.NewV7()).String()
	o, err := delivery.ApplyReceipt(ctx, pool, receipt(unknown, "delivered", herald.StatusDelivered), 0)
	require.NoError(t, err)
	require.Equal(t, delivery.ReceiptHeld, o)
	require.Equal(t, 1, held(t, pool, unknown))
	dropped, err := delivery.DropExpiredHolds(ctx, pool, 100)
	require.NoError(t, err)
	require.Contains(t, dropped, "sms:twilio")
	require.Zero(t, held(t, pool, unknown))
}

// TestApplyHeldWithNothingHeldIsOneStatement: after a send with no receipt held, nearly
// every one, ApplyHeld runs one statement and no transaction.
func TestApplyHeldWithNothingHeldIsOneStatement(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})
	ok, err := delivery.Record(ctx, pool, id, 1, time.Now(), sendOutcome())
	require.NoError(t, err)
	require.True(t, ok)

	cfg := pool.Config()
	log := &statementLog{}
	cfg.ConnConfig.Tracer = log
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer traced.Close()
	applied, err := delivery.ApplyHeld(ctx, traced, []string{id})
	require.NoError(t, err)
	require.Empty(t, applied)
	require.Len(t, log.statements, 1, "statements run: %q", log.statements)
}

// statementLog is a pgx tracer that keeps the text of every statement run.
type statementLog struct {
	mu         sync.Mutex
	statements []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statements = append(l.statements, data.SQL)
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestReceiptRacesTheSendCommit: the outcome's transaction has written SENT but not committed
// when the receipt comes. The receipt waits for the row (it reads SENDING otherwise, and the
// writer's ApplyHeld, already run, would miss its hold), then sees SENT and applies at once.
func TestReceiptRacesTheSendCommit(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	ok, err := delivery.Record(ctx, tx, id, 1, time.Now(), sendOutcome())
	require.NoError(t, err)
	require.True(t, ok)
	applied, err := delivery.ApplyHeld(ctx, tx, []string{id})
	require.NoError(t, err)
	require.Empty(t, applied, "nothing held yet")

	done := make(chan delivery.ReceiptOutcome, 1)
	go func() {
		o, err := delivery.ApplyReceipt(ctx, pool, receipt(id, "delivered", herald.StatusDelivered), time.Minute)
		if err != nil {
			t.Error(err)
		}
		done <- o
	}()
	heraldtest.WaitFor(t, 10*time.Second, "the receipt waits for the outcome's row lock", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR NO KEY UPDATE%'`).Scan(&n))
		return n == 1
	})
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, delivery.ReceiptApplied, <-done)
	require.Equal(t, herald.StatusDelivered, readReceipts(t, pool, id).Status)
	require.Zero(t, held(t, pool, id))
}

// TestHeldReceiptSweptWhenSendRecordedElsewhere: a send recorded without ApplyHeld (its
// process stopped in between) still gets its held receipt, from ApplyHeldDue.
func TestHeldReceiptSweptWhenSendRecordedElsewhere(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	id := deliverytest.One(t, pool, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})
	other := deliverytest.One(t, pool, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})
	for _, d := range []string{id, other} {
		_, err := delivery.ApplyReceipt(ctx, pool, receipt(d, "undelivered", herald.StatusUndelivered), time.Minute)
		require.NoError(t, err)
	}
	applied, err := delivery.ApplyHeldDue(ctx, pool, 100)
	require.NoError(t, err)
	require.Empty(t, applied, "neither is sent yet")

	ok, err := delivery.Record(ctx, pool, id, 1, time.Now(), sendOutcome())
	require.NoError(t, err)
	require.True(t, ok)
	applied, err = delivery.ApplyHeldDue(ctx, pool, 100)
	require.NoError(t, err)
	require.Len(t, applied, 1)
	require.Equal(t, id, applied[0].DeliveryID)
	require.Equal(t, herald.StatusUndelivered, readReceipts(t, pool, id).Status)
	require.Equal(t, 1, held(t, pool, other), "the unsent one stays held")
}
