package cdc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/stacktest"
)

// commitGroupAtEnd commits group's offsets at the current end of topic: a lane that read
// every record so far and let them go.
func commitGroupAtEnd(t *testing.T, brokers []string, group, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, adm.CommitAllOffsets(ctx, group, ends.Offsets()))
}

func TestReaperReturnsQueuedRowOnceItsLaneHasConsumedPastIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	group := stacktest.Name("g")
	cfg := h.cfg
	cfg.ConsumerGroups = map[herald.Priority]string{herald.PriorityHigh: group, herald.PriorityNormal: "-", herald.PriorityLow: "-"}
	cfg.QueuedLease = map[herald.Priority]time.Duration{herald.PriorityHigh: time.Hour} // never over in this test
	cfg.ReapInterval = 200 * time.Millisecond
	var passes atomic.Int64
	h.startRelay(cfg, func(r *Relay) { r.reapHook = func() { passes.Add(1) } })
	count := func(id string) int { r, _ := h.records.get(id); return r.count }

	// Published, QUEUED, then its lane reads past it without claiming it.
	let := h.insert(rows{n: 1, priority: herald.PriorityHigh})
	h.waitAll(let, time.Minute)
	eventually(t, 10*time.Second, func() bool { return h.status(let[0]) == herald.StatusQueued }, "not QUEUED")
	commitGroupAtEnd(t, h.brokers, group, h.cfg.Topics[herald.PriorityHigh])
	// The watermark moves when the group has passed a snapshot taken after the row was
	// QUEUED; let the reaper take one before more records arrive (in a live lane the group
	// keeps consuming, so a later snapshot is passed soon enough).
	seen := passes.Load()
	eventually(t, 30*time.Second, func() bool { return passes.Load() >= seen+2 }, "the reaper stopped")

	// Published after the lane's position: still waiting in Kafka, must be left alone.
	waiting := h.insert(rows{n: 1, priority: herald.PriorityHigh})
	h.waitAll(waiting, time.Minute)
	eventually(t, 10*time.Second, func() bool { return h.status(waiting[0]) == herald.StatusQueued }, "not QUEUED but %s, %d records", h.status(waiting[0]), count(waiting[0]))

	eventually(t, 30*time.Second, func() bool { return count(let[0]) >= 2 },
		"the row the lane let go was not published again long before its one-hour lease")
	eventually(t, 10*time.Second, func() bool { return h.status(let[0]) == herald.StatusQueued }, "not QUEUED again")
	after := passes.Load()
	eventually(t, 30*time.Second, func() bool { return passes.Load() >= after+5 }, "the reaper stopped")
	require.Equal(t, 2, count(let[0]), "a row whose new record waits in Kafka must not be reaped again")
	require.Equal(t, 1, count(waiting[0]), "a row whose record waits in Kafka must not be reaped")
	require.Equal(t, herald.StatusQueued, h.status(waiting[0]))
}

func TestReaperLeavesQueuedRowsOfAMovingLaneAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	group := stacktest.Name("g")
	topic := h.cfg.Topics[herald.PriorityHigh]
	cfg := h.cfg
	cfg.ConsumerGroups = map[herald.Priority]string{herald.PriorityHigh: group, herald.PriorityNormal: "-", herald.PriorityLow: "-"}
	cfg.QueuedLease = map[herald.Priority]time.Duration{herald.PriorityHigh: 4 * time.Second}
	cfg.ReapInterval = 100 * time.Millisecond
	h.startRelay(cfg)
	count := func(id string) int { r, _ := h.records.get(id); return r.count }

	// A backlog: 150 QUEUED rows whose records the lane has not reached.
	ids := h.insert(rows{n: 150, priority: herald.PriorityHigh})
	h.waitAll(ids, time.Minute)
	for _, id := range ids {
		eventually(t, 10*time.Second, func() bool { return h.status(id) == herald.StatusQueued }, "not QUEUED")
	}
	// The lane works through partition 0 one record at a time, slower than the lease.
	var onP0 []received
	for _, id := range ids {
		if r, _ := h.records.get(id); r.partition == 0 {
			onP0 = append(onP0, r)
		}
	}
	require.Greater(t, len(onP0), 25)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	commit := func(at int64) {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		require.NoError(t, adm.CommitAllOffsets(context.Background(), group, os))
	}
	tick := time.NewTicker(300 * time.Millisecond) // the lane's pace, not a wait for a condition
	defer tick.Stop()
	start := time.Now()
	for at := int64(0); at < 12 || time.Since(start) < 6*time.Second; at++ { // longer than the lease
		require.Less(t, at, int64(len(onP0)), "the machine is too slow for this test's pace")
		commit(at)
		<-tick.C
	}
	for _, id := range ids {
		require.Equal(t, 1, count(id), "a QUEUED row of a moving lane was reaped by its lease")
	}

	// The lane stops: after one lease without progress the lease applies again.
	eventually(t, 30*time.Second, func() bool {
		for _, id := range ids {
			if count(id) < 2 {
				return false
			}
		}
		return true
	}, "the rows of a stalled lane never went back after their lease")
}
