package delivery_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestPromptInsertIsVisibleBeforeItsFlushAndAwaitDurableFlushesIt: InsertPrompt writes what
// Insert writes, refuses a taken key as Insert does, and sets synchronous_commit = off for
// its own transaction only (read inside an explicit transaction, where the setting lives
// until the commit); Insert leaves it on. AwaitDurable returns with the WAL flushed past
// the prompt insert's commit record, and leaves the session's setting as it was.
func TestPromptInsertIsVisibleBeforeItsFlushAndAwaitDurableFlushesIt(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	note := func(key string) delivery.Notification {
		return delivery.Notification{ID: uuid.Must(uuid.NewV7()), ClientID: client, IdempotencyKey: key,
			RequestHash: []byte{1}, UserID: 1, Template: "otp", Category: "security", Priority: herald.PriorityHigh,
			Response: []byte(`{}`), Deliveries: []delivery.New{{ID: uuid.Must(uuid.NewV7()), Channel: herald.ChannelSMS}}}
	}
	insertIn := func(insert func(context.Context, delivery.DB, delivery.Notification) (bool, error), key string) (bool, string) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // only read from
		ok, err := insert(ctx, tx, note(key))
		require.NoError(t, err)
		var setting string
		require.NoError(t, tx.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting))
		return ok, setting
	}
	ok, setting := insertIn(delivery.InsertPrompt, "a")
	require.True(t, ok)
	require.Equal(t, "off", setting, "the prompt insert's transaction commits without waiting for its flush")
	ok, setting = insertIn(delivery.Insert, "a")
	require.True(t, ok)
	require.Equal(t, "on", setting, "the insert's transaction waits for its flush")

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	ok, err = delivery.InsertPrompt(ctx, conn, note("b"))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = delivery.InsertPrompt(ctx, conn, note("b"))
	require.NoError(t, err)
	require.False(t, ok, "a taken key")
	var n, d int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM notification), (SELECT count(*) FROM delivery)`).Scan(&n, &d))
	require.Equal(t, []int{1, 1}, []int{n, d}, "visible to another session, written once")

	// The commit record of the prompt insert is before the WAL's insert position read now;
	// AwaitDurable returns with the flush past it.
	var written string
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&written))
	require.NoError(t, delivery.AwaitDurable(ctx, conn))
	var flushed bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, written).Scan(&flushed))
	require.True(t, flushed, "the WAL is flushed past the prompt insert's commit")
	require.NoError(t, conn.QueryRow(ctx, `SHOW synchronous_commit`, pgx.QueryExecModeSimpleProtocol).Scan(&setting))
	require.Equal(t, "on", setting)
}
