package redrive

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/adapt"
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
