package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// While PostgreSQL does not mark rows QUEUED, the stream publishes no more than MaxUnmarked
// rows beyond the ones in flight and stops reading WAL; once marking resumes, every row is
// published and marked. Before the bound, the marker's queue grew with the whole backlog: a
// 1 M-row backlog on a starved machine took herald's memory to hundreds of megabytes.
func TestStreamWaitsForTheMarker(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	// Marking blocks on an advisory lock the test holds: a BEFORE UPDATE trigger waits for it.
	h.exec(`CREATE FUNCTION wait_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NEW; END $$`)
	h.exec(`CREATE TRIGGER wait_for_test BEFORE UPDATE ON delivery FOR EACH ROW EXECUTE FUNCTION wait_for_test()`)
	gate, err := h.pool.Acquire(ctx)
	require.NoError(t, err)
	defer gate.Release()
	_, err = gate.Exec(ctx, `SELECT pg_advisory_lock(4242)`)
	require.NoError(t, err)

	cfg := h.cfg
	cfg.MaxInFlight, cfg.MarkBatch, cfg.MaxUnmarked = 100, 100, 500
	h.startRelay(cfg)
	ids := h.insert(rows{n: 5000, priority: herald.PriorityLow})

	bound := cfg.MaxUnmarked + cfg.MaxInFlight + 1
	eventually(t, 60*time.Second, func() bool { return len(ids)-h.records.missing(ids) >= cfg.MaxUnmarked },
		"the relay published fewer than MaxUnmarked rows")
	// The stream is now held back. Watch it for two seconds: it must not go past the bound.
	// (Unbounded, the relay published all 5,000 well within that time.)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		published := len(ids) - h.records.missing(ids)
		require.LessOrEqual(t, published, bound, "published while no row could be marked")
	}
	require.Equal(t, "0", h.queryString(`SELECT count(*)::text FROM delivery WHERE status = 'QUEUED'`))

	_, err = gate.Exec(ctx, `SELECT pg_advisory_unlock(4242)`)
	require.NoError(t, err)
	h.waitAll(ids, 120*time.Second)
	eventually(t, 60*time.Second, func() bool {
		return h.queryString(`SELECT count(*)::text FROM delivery WHERE status = 'QUEUED'`) == "5000"
	}, "not every row marked QUEUED")
	t.Logf("duplicates: %d", h.records.duplicates(ids))
}
