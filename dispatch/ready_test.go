package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// Dispatch is not ready before its lanes have joined their groups, and is ready once each has
// an assignment, also an empty one: of four processes on a 2-partition LOW topic two get no
// LOW partition and are ready all the same.
func TestReadyOnceEveryLaneHasItsAssignmentEvenAnEmptyOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	ctx := context.Background()
	var ds []*Dispatcher
	for range 4 {
		d, err := New(cfg, e.pool, e.rdb, smsOnly(&MemorySender{}), zap.NewNop())
		require.NoError(t, err)
		require.ErrorIs(t, d.Ready(ctx), ErrNotReady, "ready before Run")
		ds = append(ds, e.start(cfg, nil, smsOnly(&MemorySender{})))
	}
	for i, d := range ds {
		heraldtest.WaitFor(t, time.Minute, "dispatcher ready", func() bool { return d.Ready(ctx) == nil })
		t.Logf("dispatcher %d ready", i)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	require.NoError(t, err)
	defer cl.Close()
	group := cfg.Lanes[herald.PriorityLow].Group
	heraldtest.WaitFor(t, time.Minute, "LOW group stable with 4 members", func() bool {
		g, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
		return err == nil && g[group].State == "Stable" && len(g[group].Members) == 4
	})
}

// Once ready, the HIGH lane's workers find their database connections open: the first OTPs
// after a start do not open them on their path.
func TestReadyOnceTheHighLaneConnectionsAreOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	high := cfg.Lanes[herald.PriorityHigh]
	high.Concurrency = 10
	cfg.Lanes[herald.PriorityHigh] = high
	before := e.pool.Stat().TotalConns()
	d := e.start(cfg, nil, smsOnly(&MemorySender{}))
	ctx := context.Background()
	heraldtest.WaitFor(t, time.Minute, "dispatcher ready", func() bool { return d.Ready(ctx) == nil })
	require.GreaterOrEqual(t, e.pool.Stat().TotalConns(), int32(high.Concurrency),
		"connections open when ready (%d before Run)", before)
}
