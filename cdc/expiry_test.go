package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// A PENDING row due only after its expiry ends EXPIRED at its expiry, by the sweeper, not an
// hour later when it becomes due; it is never published.
func TestSweeperExpiresPendingRowsAtTheirExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.startRelay(h.cfg)

	ids := h.insert(rows{n: 1, priority: herald.PriorityNormal, dueIn: time.Hour, expiresIn: 2 * time.Second})
	kept := h.insert(rows{n: 1, priority: herald.PriorityNormal, dueIn: time.Hour, expiresIn: time.Hour})
	start := time.Now()
	eventually(t, 15*time.Second, func() bool { return h.status(ids[0]) == herald.StatusExpired },
		"delivery %s is %s, not EXPIRED", ids[0], h.status(ids[0]))
	require.GreaterOrEqual(t, time.Since(start), time.Second, "expired before its expires_at")
	require.Equal(t, "EXPIRED", h.queryString(`SELECT outcome FROM delivery_attempt WHERE delivery_id = $1 AND attempt = 1`, ids[0]))
	require.Equal(t, herald.StatusPending, h.status(kept[0]))
	require.Equal(t, 1, h.records.missing(ids), "an expired row was published")
}

// A cancelled row is never published: the relay publishes PENDING rows only.
func TestRelayNeverPublishesCancelledRows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.startRelay(h.cfg)

	ids := h.insert(rows{n: 1, priority: herald.PriorityHigh, dueIn: time.Hour})
	n, err := delivery.Cancel(context.Background(), h.pool, []string{h.queryString(`SELECT notification_id::text FROM delivery WHERE id = $1`, ids[0])})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	// A later transaction's record arrives after every earlier transaction was decided.
	last := h.insert(rows{n: 1, priority: herald.PriorityHigh})
	h.waitAll(last, 60*time.Second)
	require.Equal(t, herald.StatusCancelled, h.status(ids[0]))
	require.Equal(t, 1, h.records.missing(ids), "a CANCELLED row was published")
}
