package cdc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// inserter inserts batches of rows at a steady pace until stopped, and keeps every id.
type inserter struct {
	mu     sync.Mutex
	ids    []string
	errs   int
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startInserter inserts batch rows per transaction every interval; it stops after total
// rows (0: until stop).
func (h *harness) startInserter(batch, total int, interval time.Duration) *inserter {
	ctx, cancel := context.WithCancel(context.Background())
	in := &inserter{cancel: cancel}
	prios := herald.Priorities
	in.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for i := 0; total == 0 || in.count() < total; i++ {
			ictx, icancel := context.WithTimeout(ctx, 10*time.Second)
			ids, err := h.tryInsert(ictx, rows{n: batch, priority: prios[i%len(prios)]})
			icancel()
			in.mu.Lock()
			if err != nil {
				in.errs++
			}
			in.ids = append(in.ids, ids...)
			in.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return in
}

func (in *inserter) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.ids)
}

func (in *inserter) stop() []string {
	in.cancel()
	in.wg.Wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.ids...)
}

func (in *inserter) wait() []string {
	in.wg.Wait()
	return in.stop()
}

func TestRelayKilledWhileInsertingLosesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cc := h.childConfig()
	cc.MaxInFlight = 500
	first := startChild(t, "first", cc)
	eventually(t, 60*time.Second, first.leader, "the relay never became leader")
	h.waitStreaming()

	// 10,000 rows, 20 per transaction, about 4,000 rows/s.
	in := h.startInserter(20, 10000, 5*time.Millisecond)
	eventually(t, 60*time.Second, func() bool {
		ids := in.snapshot()
		return len(ids) >= 2000 && len(ids)-h.records.missing(ids) >= 1000
	}, "the relay never published 1,000 rows")
	insertedAtKill := in.count()
	first.kill(t)
	ids := in.wait()
	t.Logf("killed the relay with SIGKILL after %d of %d rows were inserted", insertedAtKill, len(ids))
	require.Len(t, ids, 10000)
	require.Less(t, insertedAtKill, 10000, "the kill must happen while rows are being inserted")

	second := startChild(t, "second", cc)
	h.waitAll(ids, 120*time.Second)
	require.True(t, second.leader())
	t.Logf("every one of %d rows reached Kafka; duplicates: %d", len(ids), h.records.duplicates(ids))
}

func (in *inserter) snapshot() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.ids...)
}

func TestThreeRelaysOneActiveAndFailover(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cc := h.childConfig()
	relays := []*child{startChild(t, "a", cc), startChild(t, "b", cc), startChild(t, "c", cc)}
	leaders := func() []*child {
		var out []*child
		for _, r := range relays {
			select {
			case <-r.exited:
				continue
			default:
			}
			if r.leader() {
				out = append(out, r)
			}
		}
		return out
	}
	eventually(t, 60*time.Second, func() bool { return len(leaders()) > 0 }, "no relay became leader")
	h.waitStreaming()
	ids := h.insert(rows{n: 100})
	h.waitAll(ids, 60*time.Second)
	require.Len(t, leaders(), 1, "exactly one relay may be active")
	require.Equal(t, "1", h.queryString(`SELECT count(*)::text FROM pg_replication_slots WHERE slot_name = $1 AND active`, h.cfg.Slot))
	require.Equal(t, "1", h.queryString(`SELECT count(*)::text FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'herald-relay' AND backend_type = 'walsender'`))

	old := leaders()[0]
	old.kill(t)
	killedAt := time.Now()
	eventually(t, 30*time.Second, func() bool { return len(leaders()) > 0 }, "no relay took over")
	next := leaders()[0]
	h.waitStreaming()
	t.Logf("relay %s took over %v after relay %s was killed", next.name, next.leaderAt.Load().Sub(killedAt), old.name)

	more := h.insert(rows{n: 100, priority: herald.PriorityHigh})
	h.waitAll(more, 60*time.Second)
	require.Len(t, leaders(), 1, "exactly one relay may be active after the failover")
}
