package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// An outcome whose first write times out (here: the row is locked past the write timeout)
// is written again once the database answers: the provider was called, so the outcome is
// known, and the record's offset must not be committed with the row left SENDING for the
// reaper to turn into an ambiguous retry.
func TestOutcomeWriteRetriedAfterTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	var (
		mu   sync.Mutex
		lock pgx.Tx
	)
	s := &MemorySender{Behave: func(_ context.Context, m *senders.Message, _ int) (senders.Result, error) {
		// Lock the row during the call, so that the outcome write after it waits and times out.
		tx, err := e.pool.Begin(ctx)
		if err == nil {
			_, err = tx.Exec(ctx, `SELECT 1 FROM delivery WHERE id = $1 FOR UPDATE`, m.DeliveryID)
		}
		require.NoError(t, err)
		mu.Lock()
		lock = tx
		mu.Unlock()
		return senders.Result{ProviderMessageID: "m1"}, nil
	}}
	core, logs := observer.New(zap.WarnLevel)
	d, err := New(e.config(), e.pool, e.rdb, smsOnly(s), zap.New(core))
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	id := e.insert(fixture{Priority: herald.PriorityHigh})
	e.publish(id)
	require.Eventually(t, func() bool {
		return logs.FilterMessageSnippet("record outcome").Len() > 0
	}, 30*time.Second, 10*time.Millisecond, "the first outcome write never failed")
	// The cancelled write must be gone from the server before the lock goes, or it would
	// still take the lock and land.
	require.Eventually(t, func() bool {
		var waiting bool
		err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database db ON db.oid = l.database
			WHERE db.datname = current_database() AND NOT l.granted)`).Scan(&waiting)
		return err == nil && !waiting
	}, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	require.NoError(t, lock.Rollback(ctx))
	mu.Unlock()

	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)
	require.Equal(t, 1, s.CallCount(id))
	as := e.attempts(id)
	require.Len(t, as, 1)
	require.Equal(t, "SENT", as[0].Outcome)
}
