package cdc

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// TestRelayPublishesRedrivenRows: a re-drive's new version of a FAILED row is PENDING and due
// at write time, so the stream publishes it, with its attempt count (the next attempt
// continues the numbering). The harness's grace period is 10 minutes: the sweeper's scan,
// the fallback for rows the stream missed, cannot be what published them.
func TestRelayPublishesRedrivenRows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	failed := h.insert(rows{n: 3, priority: herald.PriorityHigh, status: herald.StatusFailed, attempts: 6})
	h.startRelay(h.cfg)
	h.waitStreaming()
	rd := make([]delivery.Redrivable, len(failed))
	for i, id := range failed {
		rd[i] = delivery.Redrivable{ID: id, Status: herald.StatusFailed, Attempts: 6}
	}
	got, err := delivery.Redrive(context.Background(), h.pool, uuid.Must(uuid.NewV7()), nil, rd)
	require.NoError(t, err)
	require.Len(t, got, len(failed))
	h.waitAll(failed, 60*time.Second)
	for _, id := range failed {
		r, _ := h.records.get(id)
		require.Equal(t, h.cfg.Topics[herald.PriorityHigh], r.topic)
		require.Equal(t, 6, r.msg.Attempts)
		require.Equal(t, strconv.Itoa(7), r.headers[herald.HeaderAttempt])
	}
}
