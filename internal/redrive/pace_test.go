package redrive

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// The re-drive's pace gives way to HIGH as the expander's does, with --redrive-rate as its
// ceiling.
func TestExecutorPaceAdapts(t *testing.T) {
	rdb, prefix := stacktest.Redis(t)
	ctx := context.Background()
	cfg := adapt.Config{Prefix: prefix}
	dispatchSide, err := adapt.New(cfg, rdb, zap.NewNop())
	require.NoError(t, err)
	ingestSide, err := adapt.New(cfg, rdb, zap.NewNop())
	require.NoError(t, err)
	x, err := New(Config{Rate: 1000, Adapt: ingestSide}, &pgxpool.Pool{}, nil)
	require.NoError(t, err)
	require.Equal(t, 1000, x.pace())
	dispatchSide.ObserveRelayLag(time.Second)
	dispatchSide.Tick(ctx)
	ingestSide.Tick(ctx)
	require.Equal(t, 700, x.pace(), "relay lagging: 1,000 × 0.7")
	unpaced, err := New(Config{Rate: -1, Adapt: ingestSide}, &pgxpool.Pool{}, nil)
	require.NoError(t, err)
	require.Equal(t, -1, unpaced.pace())
}

// The pause after a lot follows the adaptive rate while it lasts: a lot of 1,000 re-armed at
// the floor (100/s) is followed by a pause of 10 s, but when HIGH is well again and the limit
// climbs back to its ceiling (1,000/s) during that pause, the next lot starts about 1 s after
// the first began, not 10 s.
func TestExecutorPauseFollowsTheRate(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := deliverytest.Client(t, pool)
	deliverytest.Backlog(t, pool, 2000, deliverytest.Spec{ClientID: client, Status: herald.StatusFailed, Attempts: 1,
		Priority: herald.PriorityLow})
	ans, _, err := Create(ctx, pool, client, "pause", Request{Filter: Filter{Status: []herald.Status{herald.StatusFailed}}}, 0)
	require.NoError(t, err)
	x, err := New(Config{Rate: 1000, LotSize: 1000}, pool, zaptest.NewLogger(t))
	require.NoError(t, err)
	x.rate = adapt.NewLimiter("redrive", 1000)
	for x.pace() > 100 {
		x.rate.Step(adapt.Congested)
	}
	redriven := func() int64 {
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT redriven FROM redrive WHERE id = $1`, ans.ID).Scan(&n))
		return n
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, x.Run(ctx))
	}()
	defer func() { cancel(); <-done }()
	heraldtest.WaitFor(t, 30*time.Second, "the first lot", func() bool { return redriven() == 1000 })
	for x.pace() < 1000 {
		x.rate.Step(adapt.Clear)
	}
	heraldtest.WaitFor(t, 5*time.Second, "the second lot, well within the floor's 10 s pause", func() bool { return redriven() == 2000 })
}
