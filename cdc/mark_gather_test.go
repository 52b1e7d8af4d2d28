package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestMarkerGathersAcknowledgedRows: rows Kafka acknowledges one by one are marked QUEUED
// together, in one statement, once a batch is full (or MarkGather passed): the first row
// waits for the others instead of costing a transaction of its own.
func TestMarkerGathersAcknowledgedRows(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	client := deliverytest.Client(t, pool)
	const n = 100
	ids := deliverytest.Insert(t, pool, n, deliverytest.Spec{ClientID: client})
	m, err := newMetrics(&publisher{}, "test")
	require.NoError(t, err)
	// The marker's own pool: its acquisitions are its statements.
	markPool, err := pgpool.New(context.Background(), pool.Config().ConnString(), 0)
	require.NoError(t, err)
	t.Cleanup(markPool.Close)
	mk := newMarker(markPool, n, time.Minute, zap.NewNop(), m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { mk.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	row := func(id string) deliveryRow {
		v := deliverytest.Version(t, pool, id)
		return deliveryRow{ID: id, Status: herald.StatusPending, Attempts: v.Attempts, NextAttemptAt: v.NextAttemptAt, UpdatedAt: v.UpdatedAt}
	}
	rows := make([]deliveryRow, n)
	for i, id := range ids {
		rows[i] = row(id)
	}
	mk.add(rows[0])
	// The first row alone is not marked while the batch is not full and MarkGather (a
	// minute here) has not passed. (The pause only gives a marker that did not wait the time
	// to mark it; the marker under test passes whatever the pause.)
	time.Sleep(300 * time.Millisecond)
	var first herald.Status
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status FROM delivery WHERE id = $1`, ids[0]).Scan(&first))
	require.Equal(t, herald.StatusPending, first, "the first acknowledged row was marked alone")
	require.Zero(t, markPool.Stat().AcquireCount(), "the marker ran a statement before its batch was full")
	for _, r := range rows[1:] {
		mk.add(r)
	}
	heraldtest.WaitFor(t, 30*time.Second, "every row QUEUED", func() bool {
		var queued int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE status = 'QUEUED'`).Scan(&queued))
		return queued == n
	})
	require.EqualValues(t, 1, markPool.Stat().AcquireCount(), "statements that marked the %d rows", n)
}
