package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestRelayPublishesAfterPartitionMigrationAndDrop: a relay streaming from an unpartitioned
// delivery table, with a publication made before partitions existed, goes on publishing
// through migration 00060 (run while it streams) and after retention drops a day; the
// slot's confirmed position catches up with the WAL after the drop.
func TestRelayPublishesAfterPartitionMigrationAndDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarnessOn(t, nil, stacktest.PostgresURLAt(t, stacktest.VersionBefore(t, 60)))
	h.exec(`CREATE PUBLICATION ` + h.cfg.Publication + ` FOR TABLE delivery WITH (publish = 'insert, update')`)
	events := h.collectEvents()
	h.startRelay(h.cfg)

	var now time.Time
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	deliverytest.InsertUnpartitioned(t, h.pool, h.clientID, []time.Time{now.AddDate(0, 0, -45), now.AddDate(0, 0, -2), now})

	_, err := migrate.Up(ctx, h.pool)
	require.NoError(t, err)
	after := h.insert(rows{n: 20, priority: herald.PriorityHigh})
	h.waitAll(after, 60*time.Second)
	for _, id := range after {
		eventually(t, 10*time.Second, func() bool { return h.status(id) == herald.StatusQueued }, "delivery %s not QUEUED", id)
	}

	// A day past the retention, all final, with rows written after the migration too.
	old := partition.DayOf(now).Add(-45)
	at := old.Time().Add(time.Hour)
	nid, err := deliverytest.IDAt(at)
	require.NoError(t, err)
	did, err := deliverytest.IDAt(at)
	require.NoError(t, err)
	ok, err := delivery.Insert(ctx, h.pool, delivery.Notification{ID: nid, ClientID: h.clientID, IdempotencyKey: "old",
		RequestHash: []byte{1}, UserID: 1, Template: "t", Category: "c", Priority: herald.PriorityLow, Response: []byte(`{}`),
		Deliveries: []delivery.New{{ID: did, Channel: herald.ChannelSMS}}})
	require.NoError(t, err)
	require.True(t, ok)
	h.waitAll([]string{did.String()}, 60*time.Second) // a PENDING row of an old day is published like any other
	deliverytest.Place(t, h.pool, []string{did.String()}, deliverytest.Spec{Status: herald.StatusSent})
	// The outbox (migration 00090, run while the relay streamed) joined the publication: the
	// SENT's event is streamed without a restart.
	sent := h.queryString(`SELECT id::text FROM delivery_event WHERE delivery_id = $1`, did)
	eventually(t, 30*time.Second, func() bool { return events.missing([]string{sent}) == 0 }, "event %s never reached Kafka", sent)

	m, err := partition.New(partition.Config{Retention: 30 * 24 * time.Hour}, h.pool, zaptest.NewLogger(t))
	require.NoError(t, err)
	// A pass may meet the relay's sweeper or reaper holding a parent the drop wants, and keep
	// the day as locked; the next pass drops it, as the job's next tick would.
	locked := func(r partition.Result) bool {
		for _, k := range r.Kept {
			if k.Day == old && k.Reason == partition.ReasonLocked {
				return true
			}
		}
		return false
	}
	var res partition.Result
	for range 5 {
		res, err = m.Pass(ctx)
		require.NoError(t, err)
		if !locked(res) {
			break
		}
	}
	require.Equal(t, []partition.Day{old}, res.Dropped, "kept: %+v", res.Kept)
	target := h.currentWAL()
	start := time.Now()
	eventually(t, 30*time.Second, func() bool { return h.confirmedFlush() >= target },
		"confirmed_flush_lsn %d stayed behind %d after the drop", h.confirmedFlush(), target)
	t.Logf("slot confirmed past the drop's WAL position in %v; lag now %d bytes",
		time.Since(start).Round(time.Millisecond), int64(h.currentWAL())-int64(h.confirmedFlush()))

	later := h.insert(rows{n: 20, priority: herald.PriorityNormal})
	h.waitAll(later, 60*time.Second)
	require.Empty(t, h.records.malformed())
}

// TestRelayPublishesViaThePartitionRoot: a publication made without
// publish_via_partition_root (by hand, or by a relay before partitions) is altered when a
// relay takes the lead, and rows of any day are published from the one relation delivery.
func TestRelayPublishesViaThePartitionRoot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.exec(`CREATE PUBLICATION ` + h.cfg.Publication + ` FOR TABLE delivery WITH (publish = 'insert, update')`)
	h.startRelay(h.cfg)
	require.Equal(t, "true", h.queryString(`SELECT pubviaroot::text FROM pg_publication WHERE pubname = $1`, h.cfg.Publication))
	ids := h.insert(rows{n: 3, priority: herald.PriorityNormal})
	h.waitAll(ids, 60*time.Second)
}
