package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestClaimBatchTakesOnlyFreshRows claims, in one batch, rows read correctly (PENDING and
// QUEUED) together with rows whose read is stale (wrong attempt count, already final, not
// due, expired) and a row another transaction holds locked: the fresh rows are claimed, each
// at its own attempt count, and every other row stays exactly as it was, with no attempt
// logged. The locked row is claimed once its lock is gone.
func TestClaimBatchTakesOnlyFreshRows(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	row := func(s deliverytest.Spec) string {
		s.ClientID = client
		return deliverytest.One(t, pool, s)
	}
	pending := row(deliverytest.Spec{})
	queued := row(deliverytest.Spec{Status: herald.StatusQueued, Attempts: 2})
	wrongAttempt := row(deliverytest.Spec{Attempts: 1})
	final := row(deliverytest.Spec{Status: herald.StatusSent, Attempts: 1})
	later := row(deliverytest.Spec{DueIn: time.Hour})
	expired := row(deliverytest.Spec{ExpiresIn: -time.Second})
	locked := row(deliverytest.Spec{})

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // rolled back below; a second rollback is a no-op
	_, err = tx.Exec(ctx, `SELECT 1 FROM delivery WHERE id = $1 FOR UPDATE`, locked)
	require.NoError(t, err)

	before := map[string]state{}
	for _, id := range []string{wrongAttempt, final, later, expired, locked} {
		before[id] = read(t, pool, id)
	}
	claimed, err := delivery.ClaimBatch(ctx, pool, []delivery.Seen{
		{ID: pending, Attempts: 0}, {ID: queued, Attempts: 2}, {ID: wrongAttempt, Attempts: 0},
		{ID: final, Attempts: 1}, {ID: later, Attempts: 0}, {ID: expired, Attempts: 0}, {ID: locked, Attempts: 0},
	})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	require.Equal(t, 1, claimed[pending].Attempt)
	require.Equal(t, 3, claimed[queued].Attempt)
	require.WithinDuration(t, time.Now(), claimed[pending].StartedAt, time.Minute)
	require.Equal(t, state{Status: herald.StatusSending, Attempts: 1}, read(t, pool, pending))
	require.Equal(t, state{Status: herald.StatusSending, Attempts: 3}, read(t, pool, queued))
	for id, s := range before {
		require.Equal(t, s, read(t, pool, id), "a row the batch must not claim changed")
	}

	// A second batch with the same reads claims nothing: the claims above used them up.
	again, err := delivery.ClaimBatch(ctx, pool, []delivery.Seen{{ID: pending, Attempts: 0}, {ID: queued, Attempts: 2}})
	require.NoError(t, err)
	require.Empty(t, again)

	require.NoError(t, tx.Rollback(ctx))
	claimed, err = delivery.ClaimBatch(ctx, pool, []delivery.Seen{{ID: locked, Attempts: 0}})
	require.NoError(t, err)
	require.Equal(t, 1, claimed[locked].Attempt)
}

// TestRecordBatchMatchesRecord writes the four kinds of outcome once with Record, one row at
// a time, and once with RecordBatch, all in one statement together with a stale outcome (the
// wrong attempt) and one for a row no longer in flight: the batch leaves every row and
// attempt log exactly as Record does, and the stale outcomes change nothing.
func TestRecordBatchMatchesRecord(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	sending := func() string {
		return deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusSending, Attempts: 1})
	}
	outcomes := []delivery.Outcome{
		{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:a", ProviderID: "m-1", ProviderCode: "ok"},
		{Status: herald.StatusPending, AttemptClass: "TRANSIENT", Error: "busy", Provider: "sms:a", ProviderCode: "429", RetryIn: time.Hour},
		{Status: herald.StatusFailed, AttemptClass: "PERMANENT", Error: "bad number", Provider: "sms:a", ProviderCode: "21211"},
		{Status: herald.StatusExpired, AttemptClass: "EXPIRED", Error: "expired while waiting"},
	}
	started := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	var single, batch []string
	var rs []delivery.Recording
	for _, o := range outcomes {
		one := sending()
		ok, err := delivery.Record(ctx, pool, one, 1, started, o)
		require.NoError(t, err)
		require.True(t, ok)
		single = append(single, one)
		id := sending()
		batch = append(batch, id)
		rs = append(rs, delivery.Recording{ID: id, Attempt: 1, StartedAt: started, Outcome: o})
	}
	stale := sending()
	queued := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusQueued, Attempts: 1})
	rs = append(rs,
		delivery.Recording{ID: stale, Attempt: 2, StartedAt: started, Outcome: outcomes[0]},
		delivery.Recording{ID: queued, Attempt: 1, StartedAt: started, Outcome: outcomes[2]})
	staleBefore, queuedBefore := read(t, pool, stale), read(t, pool, queued)

	recorded, err := delivery.RecordBatch(ctx, pool, rs)
	require.NoError(t, err)
	require.Len(t, recorded, len(outcomes))
	for i := range outcomes {
		require.Contains(t, recorded, batch[i])
		require.Equal(t, written(t, ctx, pool, single[i]), written(t, ctx, pool, batch[i]), outcomes[i].AttemptClass)
	}
	require.Equal(t, staleBefore, read(t, pool, stale))
	require.Equal(t, queuedBefore, read(t, pool, queued))

	// The same outcomes again: the rows moved on, nothing matches.
	recorded, err = delivery.RecordBatch(ctx, pool, rs[:len(outcomes)])
	require.NoError(t, err)
	require.Empty(t, recorded)

	_, err = delivery.RecordBatch(ctx, pool, []delivery.Recording{rs[0], rs[0]})
	require.Error(t, err, "an id twice in one batch")
}

// outcomeRow is what an outcome write leaves in a delivery row and its attempt log, with
// times made relative so that two rows written a moment apart compare equal.
type outcomeRow struct {
	Status, Attempts                         any
	SentSet                                  bool
	Provider, ProviderMessageID, LastError   *string
	RetryHours                               float64
	Attempt, Outcome, Error, AProvider, Code any
	AttemptStarted                           time.Time
	AttemptNextSet                           bool
}

func written(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id string) outcomeRow {
	t.Helper()
	var r outcomeRow
	require.NoError(t, pool.QueryRow(ctx, `
SELECT d.status, d.attempts, d.sent_at IS NOT NULL, d.provider, d.provider_message_id, d.last_error,
       round(extract(epoch FROM d.next_attempt_at - now()) / 3600),
       a.attempt, a.outcome, a.error, a.provider, a.provider_code, a.started_at, a.next_attempt_at IS NOT NULL
  FROM delivery d JOIN delivery_attempt a ON a.delivery_id = d.id
 WHERE d.id = $1`, id).Scan(&r.Status, &r.Attempts, &r.SentSet, &r.Provider, &r.ProviderMessageID, &r.LastError,
		&r.RetryHours, &r.Attempt, &r.Outcome, &r.Error, &r.AProvider, &r.Code, &r.AttemptStarted, &r.AttemptNextSet))
	r.AttemptStarted = r.AttemptStarted.UTC()
	return r
}
