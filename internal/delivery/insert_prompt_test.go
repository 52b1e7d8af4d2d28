package delivery_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestPromptInsertIsVisibleBeforeItsFlushAndDurableWhenItReturns: the prompt insert's
// statement writes what the insert writes and sets synchronous_commit = off for its own
// transaction only (read inside an explicit transaction, where the setting lives until the
// commit); the insert's leaves it on. InsertPromptDurable runs visible once the rows are
// visible to another session, and returns with the WAL flushed past the WAL position read
// inside visible, so past the insert's commit record; a taken key writes nothing and runs
// no visible; the session's setting is left as it was.
func TestPromptInsertIsVisibleBeforeItsFlushAndDurableWhenItReturns(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	note := func(key string) delivery.Notification { return otpNotification(client, key) }
	for _, c := range []struct {
		sql, setting string
	}{{delivery.InsertPromptSQLForTest, "off"}, {delivery.InsertSQLForTest, "on"}} {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.QueryRow(ctx, c.sql, delivery.InsertArgsForTest(note("a"))...).Scan(&n))
		require.Equal(t, 1, n)
		var setting string
		require.NoError(t, tx.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting))
		require.Equal(t, c.setting, setting, "synchronous_commit of the transaction of %s", c.sql)
		require.NoError(t, tx.Rollback(ctx))
	}

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	// A slot of its own shows what the WAL holds up to its flush: logical decoding reads no
	// further (test_decoding's text: each change, and the message of the flush's wait).
	slot := "prompt_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	_, err = pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, slot)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot) })
	visibles := 0
	n := note("b")
	ok, err := delivery.InsertPromptDurable(ctx, conn.Conn(), n, func() {
		visibles++
		var seen int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM delivery WHERE notification_id = $1`, n.ID).Scan(&seen))
		require.Equal(t, 1, seen, "visible to another session when visible runs")
	})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, visibles)
	rows, err := pool.Query(ctx, `SELECT data FROM pg_logical_slot_peek_changes($1, NULL, NULL)`, slot)
	require.NoError(t, err)
	flushed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	insert, message := -1, -1
	for i, d := range flushed {
		switch {
		case insert < 0 && strings.Contains(d, "INSERT") && strings.Contains(d, n.Deliveries[0].ID.String()):
			insert = i
		case message < 0 && strings.Contains(d, "prefix: herald.durable"):
			message = i
		}
	}
	require.GreaterOrEqual(t, insert, 0, "the insert's delivery row is in the flushed WAL when InsertPromptDurable returns: %q", flushed)
	require.Greater(t, message, insert, "and the flush's message after it: %q", flushed)

	ok, err = delivery.InsertPromptDurable(ctx, conn.Conn(), note("b"), func() { visibles++ })
	require.NoError(t, err)
	require.False(t, ok, "a taken key")
	require.Equal(t, 1, visibles, "nothing written, nothing visible")
	var notes, deliveries int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM notification), (SELECT count(*) FROM delivery)`).Scan(&notes, &deliveries))
	require.Equal(t, []int{1, 1}, []int{notes, deliveries})
	var setting string
	require.NoError(t, conn.QueryRow(ctx, `SHOW synchronous_commit`, pgx.QueryExecModeSimpleProtocol).Scan(&setting))
	require.Equal(t, "on", setting)

	// AwaitDurable, a replay's wait, writes its message and returns once it is flushed.
	require.NoError(t, delivery.AwaitDurable(ctx, conn))
	rows, err = pool.Query(ctx, `SELECT data FROM pg_logical_slot_peek_changes($1, NULL, NULL)`, slot)
	require.NoError(t, err)
	flushed, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	messages := 0
	for _, d := range flushed {
		if strings.Contains(d, "prefix: herald.durable") {
			messages++
		}
	}
	require.Equal(t, 3, messages, "the pipeline's two (the taken key's too) and AwaitDurable's: %q", flushed)
}

// otpNotification is a HIGH notification of client with one SMS delivery, fresh ids and
// Idempotency-Key key, for the tests of the insert.
func otpNotification(client, key string) delivery.Notification {
	return delivery.Notification{ID: uuid.Must(uuid.NewV7()), ClientID: client, IdempotencyKey: key,
		RequestHash: []byte{1}, UserID: 1, Template: "otp", Category: "security", Priority: herald.PriorityHigh,
		Response: []byte(`{}`), Deliveries: []delivery.New{{ID: uuid.Must(uuid.NewV7()), Channel: herald.ChannelSMS}}}
}
