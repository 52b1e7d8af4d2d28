package redrive

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// A re-drive runs in lots of DefaultLotSize (500) by default, half the campaign expander's
// 1,000, so that each lot's burst of writes, WAL and records is shorter (docs/redrive.md):
// 1,200 matches take three lots of 500, 500 and 200, each its own transaction.
func TestExecutorRunsDefaultLots(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	deliverytest.Backlog(t, pool, 1200, deliverytest.Spec{ClientID: client, Status: herald.StatusFailed, Attempts: 1,
		Priority: herald.PriorityLow})
	ans, _, err := Create(ctx, pool, client, "lots", Request{Filter: Filter{Status: []herald.Status{herald.StatusFailed}}}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1200, ans.Matched)
	x, err := New(Config{Rate: -1}, pool, zaptest.NewLogger(t))
	require.NoError(t, err)
	var lots []int
	for {
		worked, armed, err := x.runLot(ctx)
		require.NoError(t, err)
		if !worked {
			break
		}
		lots = append(lots, armed)
	}
	require.Equal(t, []int{500, 500, 200}, lots)
	var txs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM delivery WHERE status = 'PENDING'`).Scan(&txs))
	require.Equal(t, 3, txs, "one transaction per lot")
}
