package adapt

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// Reports of several processes meet on the board: the worst of the fresh ones is the signal,
// and a report no longer refreshed drops out.
func TestBoardWorstFreshReport(t *testing.T) {
	rdb, prefix := stacktest.Redis(t)
	ctx := context.Background()
	b := NewBoard(rdb, prefix, 300*time.Millisecond)
	s, err := b.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, Signal{}, s, "an empty board")

	require.NoError(t, b.ReportHigh(ctx, "a", 4*time.Millisecond))
	require.NoError(t, b.ReportHigh(ctx, "b", 31*time.Millisecond))
	require.NoError(t, b.ReportRelayLag(ctx, "r", 250*time.Millisecond))
	s, err = b.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, Signal{HighReports: 2, HighLatency: 31 * time.Millisecond, RelayReports: 1, RelayLag: 250 * time.Millisecond}, s)

	require.NoError(t, b.ReportHigh(ctx, "b", 2*time.Millisecond)) // b's new report replaces its old one
	s, err = b.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, 4*time.Millisecond, s.HighLatency)

	// Only a keeps reporting: b and the relay age out.
	heraldtest.WaitFor(t, 5*time.Second, "stale reports dropped", func() bool {
		require.NoError(t, b.ReportHigh(ctx, "a", 7*time.Millisecond))
		s, err = b.Read(ctx)
		require.NoError(t, err)
		return s.HighReports == 1 && s.RelayReports == 0
	})
	require.Equal(t, 7*time.Millisecond, s.HighLatency)
	n, err := rdb.HLen(ctx, prefix+"adapt:signal").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "stale fields deleted")
}

// Across processes: what one controller observes (a dispatch process seeing HIGH slow) shrinks
// the limiters of another (an ingest process's expander); when HIGH goes quiet, they return to
// their ceilings; a relay lag past its target shrinks them too.
func TestControllersShareTheSignal(t *testing.T) {
	rdb, prefix := stacktest.Redis(t)
	ctx := context.Background()
	cfg := Config{Prefix: prefix, Interval: 50 * time.Millisecond,
		Targets: Targets{HighLatency: 20 * time.Millisecond, RelayLag: 100 * time.Millisecond}}
	dispatchSide, err := New(cfg, rdb, zap.NewNop())
	require.NoError(t, err)
	ingestSide, err := New(cfg, rdb, zap.NewNop())
	require.NoError(t, err)
	expander := ingestSide.Limiter("expander", 5000)

	for range 10 {
		dispatchSide.ObserveHigh(50 * time.Millisecond)
	}
	dispatchSide.Tick(ctx)
	ingestSide.Tick(ctx)
	require.Equal(t, 3500, expander.Limit(), "HIGH past its target: 5000 × 0.7")

	dispatchSide.ObserveHigh(5 * time.Millisecond)
	dispatchSide.Tick(ctx)
	ingestSide.Tick(ctx)
	require.Equal(t, 4000, expander.Limit(), "HIGH well: +500")

	dispatchSide.ObserveHigh(40 * time.Millisecond)
	dispatchSide.Tick(ctx)
	ingestSide.Tick(ctx)
	require.Equal(t, 2800, expander.Limit())

	// HIGH quiet: dispatch reports nothing; once its last report is stale, the ceiling at once.
	heraldtest.WaitFor(t, 5*time.Second, "no fresh signal", func() bool {
		ingestSide.Tick(ctx)
		return ingestSide.verdict.Load() == int64(Unknown)
	})
	require.Equal(t, 5000, expander.Limit())

	dispatchSide.ObserveRelayLag(300 * time.Millisecond)
	dispatchSide.Tick(ctx)
	ingestSide.Tick(ctx)
	require.Equal(t, 3500, expander.Limit(), "relay lag past its target")
}

// Without Redis the limits are the configured ones.
func TestControllerRedisDownCeilings(t *testing.T) {
	rdb, prefix := stacktest.Redis(t)
	c, err := New(Config{Prefix: prefix}, rdb, zap.NewNop())
	require.NoError(t, err)
	l := c.Limiter("dispatch.low", 10)
	l.Step(Congested)
	require.Equal(t, 7, l.Limit())
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // every Redis call fails
	c.ObserveHigh(time.Second)
	c.Tick(ctx)
	require.Equal(t, 10, l.Limit())
	var nilController *Controller
	fixed := nilController.Limiter("expander", 100)
	nilController.ObserveHigh(time.Second)
	require.Equal(t, 100, fixed.Limit())
}

// With a tolerance, on a machine where HIGH never gets under the absolute target, steady
// background work is not held at its floor: once the calm latency is known, HIGH within twice it lets the limit
// climb back to the ceiling; a surge past twice it shrinks the limit again.
func TestSlowMachineKeepsBackgroundWork(t *testing.T) {
	rdb, prefix := stacktest.Redis(t)
	ctx := context.Background()
	c, err := New(Config{Prefix: prefix, Interval: 50 * time.Millisecond, Targets: Targets{Tolerance: 2}}, rdb, zap.NewNop())
	require.NoError(t, err)
	clock := time.Now()
	c.now = func() time.Time { return clock }
	low := c.Limiter("dispatch.low", 10)
	tick := func(high time.Duration) {
		clock = clock.Add(250 * time.Millisecond)
		c.ObserveHigh(high)
		c.Tick(ctx)
	}
	for range 8 {
		tick(30 * time.Millisecond)
	}
	require.Equal(t, 1, low.Limit(), "calm latency not yet known: 30 ms is past the 15 ms target")
	for range int(calmWarm / (250 * time.Millisecond)) {
		tick(30 * time.Millisecond)
	}
	for range 10 {
		tick(45 * time.Millisecond)
	}
	require.Equal(t, 10, low.Limit(), "45 ms is within twice the calm 30 ms: the ceiling")
	tick(70 * time.Millisecond)
	require.Equal(t, 7, low.Limit(), "a surge past twice the calm latency")
}
