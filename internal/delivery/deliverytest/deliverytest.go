// Package deliverytest writes delivery rows for tests: notifications and their deliveries
// inserted through the real insert transition (delivery.Insert), optionally placed in a
// later state, and large backlogs cloned from such a row. Tests of ingest, cdc, dispatch,
// cmd/herald and the benchmarks use it instead of SQL of their own, so that a fixture cannot
// drift from the transitions it stands for.
package deliverytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// Spec describes the notifications to insert: each gets one delivery. Zero fields take the
// defaults noted.
type Spec struct {
	// ClientID is the api_client the notifications belong to. Default: a new client.
	ClientID string
	// UserID is the recipient user. Default 1.
	UserID int64
	// Template and Category. Default "otp", "security".
	Template, Category string
	// Payload and Recipient are JSON; Payload defaults to {}, Recipient to none.
	Payload, Recipient string
	// Channel of the delivery. Default SMS.
	Channel herald.Channel
	// Priority. Default NORMAL.
	Priority herald.Priority
	// Traceparent stored on the notification and the delivery. Default none.
	Traceparent string
	// DueIn sets next_attempt_at to the database's now() + DueIn. Zero: due at write, so the
	// relay publishes the row as soon as it commits.
	DueIn time.Duration
	// ExpiresIn sets expires_at to now() + ExpiresIn; negative: already expired. Zero: none.
	ExpiresIn time.Duration
	// Status and Attempts place the rows in a state other than a fresh PENDING one, without
	// the history that would lead there (see place). Default PENDING, 0.
	Status   herald.Status
	Attempts int
}

func (s Spec) withDefaults() Spec {
	if s.UserID == 0 {
		s.UserID = 1
	}
	if s.Template == "" {
		s.Template = "otp"
	}
	if s.Category == "" {
		s.Category = "security"
	}
	if s.Channel == "" {
		s.Channel = herald.ChannelSMS
	}
	if s.Priority == "" {
		s.Priority = herald.PriorityNormal
	}
	if s.Status == "" {
		s.Status = herald.StatusPending
	}
	return s
}

// placed reports whether the spec asks for a state the insert alone does not give.
func (s Spec) placed() bool {
	return s.Status != herald.StatusPending || s.Attempts != 0
}

// Beginner is a pool, a connection or a transaction (Begin then opens a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Insert inserts n notifications like s, one delivery each, in one transaction, and returns
// the delivery ids in insert order.
func Insert(t testing.TB, db Beginner, n int, s Spec) []string {
	t.Helper()
	ids, err := TryInsert(context.Background(), db, n, s)
	if err != nil {
		t.Fatalf("insert %d deliveries: %v", n, err)
	}
	return ids
}

// One is Insert of a single delivery.
func One(t testing.TB, db Beginner, s Spec) string {
	t.Helper()
	return Insert(t, db, 1, s)[0]
}

// insertBatch is how many inserts go to the server in one round trip.
const insertBatch = 1000

// TryInsert is Insert returning its error, for goroutines and for tests that cut the
// connection on purpose. On an error it returns no ids.
func TryInsert(ctx context.Context, db Beginner, n int, s Spec) ([]string, error) {
	s = s.withDefaults()
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if s.ClientID == "" {
		if s.ClientID, err = newClient(ctx, tx); err != nil {
			return nil, err
		}
	}
	// now() is the transaction's start time: the same value the insert's default and the
	// trigger's updated_at take, so a relative time here is relative to the database clock.
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, err
	}
	var next, expires *time.Time
	if s.DueIn != 0 || s.placed() {
		at := now.Add(s.DueIn)
		if s.placed() {
			// Not due at write: the relay skips this version and sees only the placed one.
			at = now.Add(24 * time.Hour)
		}
		next = &at
	}
	if s.ExpiresIn != 0 {
		at := now.Add(s.ExpiresIn)
		expires = &at
	}
	ids := make([]string, 0, n)
	for from := 0; from < n; from += insertBatch {
		b := &pgx.Batch{}
		inserted := make([]bool, min(insertBatch, n-from))
		for i := range inserted {
			nid, err := uuid.NewV7()
			if err != nil {
				return nil, err
			}
			did, err := uuid.NewV7()
			if err != nil {
				return nil, err
			}
			note := delivery.Notification{
				ID: nid, ClientID: s.ClientID, IdempotencyKey: nid.String(), RequestHash: []byte{0},
				UserID: s.UserID, Template: s.Template, Category: s.Category, Priority: s.Priority,
				Traceparent: s.Traceparent, ExpiresAt: expires, Response: []byte(`{}`),
				Deliveries:    []delivery.New{{ID: did, Channel: s.Channel}},
				NextAttemptAt: next,
			}
			if s.Payload != "" {
				note.Payload = []byte(s.Payload)
			}
			if s.Recipient != "" {
				note.Recipient = []byte(s.Recipient)
			}
			delivery.QueueInsert(b, note, &inserted[i])
			ids = append(ids, did.String())
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
		for _, ok := range inserted {
			if !ok {
				return nil, fmt.Errorf("insert notification: idempotency key taken")
			}
		}
	}
	if s.placed() {
		if err := place(ctx, tx, ids, s); err != nil {
			return nil, err
		}
	}
	// No ids without a commit: a commit cut short (its context ended, its connection lost)
	// has an unknown outcome, and an id returned then would be counted as inserted.
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return ids, nil
}

// placeSQL is a fixture, not a transition: it puts fresh rows in the state a test starts
// from (QUEUED, SENDING, SENT, FAILED, a PENDING row with earlier attempts) in the same
// transaction as their insert, so that the relay sees one version of each row, the placed
// one. Transitions live in internal/delivery; this only saves a test the history.
const placeSQL = `
UPDATE delivery SET status = $2, attempts = $3, next_attempt_at = now() + make_interval(secs => $4)
 WHERE id = ANY($1::uuid[])`

func place(ctx context.Context, tx pgx.Tx, ids []string, s Spec) error {
	if _, err := tx.Exec(ctx, placeSQL, ids, string(s.Status), s.Attempts, s.DueIn.Seconds()); err != nil {
		return fmt.Errorf("place %d deliveries %s: %w", len(ids), s.Status, err)
	}
	return nil
}

// Client creates an api_client and returns its id.
func Client(t testing.TB, db Beginner) string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatalf("create api client: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	id, err := newClient(ctx, tx)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		t.Fatalf("create api client: %v", err)
	}
	return id
}

func newClient(ctx context.Context, tx pgx.Tx) (string, error) {
	var id string
	err := tx.QueryRow(ctx, `INSERT INTO api_client (id, name, key_prefix, key_hash)
		VALUES (gen_random_uuid(), 'test', 'hk_test', sha256(gen_random_uuid()::text::bytea)) RETURNING id::text`).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("create api client: %w", err)
	}
	return id, nil
}

// Place puts existing rows in the state s describes (Status, Attempts, next_attempt_at =
// now() + DueIn), with placeSQL: for tests that start from rows another part of herald
// inserted (an API call).
func Place(t testing.TB, db Beginner, ids []string, s Spec) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err == nil {
		defer func() { _ = tx.Rollback(ctx) }()
		if err = place(ctx, tx, ids, s.withDefaults()); err == nil {
			err = tx.Commit(ctx)
		}
	}
	if err != nil {
		t.Fatalf("place deliveries: %v", err)
	}
}

// Version reads the row version of delivery id that delivery.MarkQueued compares against
// (attempts, next_attempt_at, updated_at), as the relay sees it in the WAL.
func Version(t testing.TB, db delivery.DB, id string) delivery.Version {
	t.Helper()
	v := delivery.Version{ID: id}
	err := db.QueryRow(context.Background(), `SELECT attempts, next_attempt_at, updated_at FROM delivery WHERE id = $1`, id).
		Scan(&v.Attempts, &v.NextAttemptAt, &v.UpdatedAt)
	if err != nil {
		t.Fatalf("read version of delivery %s: %v", id, err)
	}
	return v
}
