package campaign

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

// The expander's pace follows the shared signal: --campaign-rate is the ceiling, a slow HIGH
// reported by another process (dispatch) slows the expansion, and without a report the pace
// is the configured rate again. Unpaced stays unpaced.
func TestExpanderPaceAdapts(t *testing.T) {
	rdb, prefix := stacktest.Redis(t)
	ctx := context.Background()
	cfg := adapt.Config{Prefix: prefix, Interval: 20 * time.Millisecond}
	dispatchSide, err := adapt.New(cfg, rdb, zap.NewNop())
	require.NoError(t, err)
	ingestSide, err := adapt.New(cfg, rdb, zap.NewNop())
	require.NoError(t, err)
	x, err := NewExpander(ExpanderConfig{Rate: 4000, Adapt: ingestSide}, &pgxpool.Pool{}, nil)
	require.NoError(t, err)
	require.Equal(t, 4000, x.pace())

	dispatchSide.ObserveHigh(time.Second)
	dispatchSide.Tick(ctx)
	ingestSide.Tick(ctx)
	require.Equal(t, 2800, x.pace(), "HIGH slow: 4,000 × 0.7")
	dispatchSide.ObserveHigh(time.Second)
	dispatchSide.Tick(ctx)
	ingestSide.Tick(ctx)
	require.Equal(t, 1960, x.pace())
	dispatchSide.ObserveHigh(time.Millisecond)
	dispatchSide.Tick(ctx)
	ingestSide.Tick(ctx)
	require.Equal(t, 2360, x.pace(), "HIGH well again: +400/s per step")

	unpaced, err := NewExpander(ExpanderConfig{Rate: -1, Adapt: ingestSide}, &pgxpool.Pool{}, nil)
	require.NoError(t, err)
	require.Equal(t, -1, unpaced.pace())
	fixed, err := NewExpander(ExpanderConfig{Rate: 4000}, &pgxpool.Pool{}, nil)
	require.NoError(t, err)
	ingestSide.Tick(ctx)
	require.Equal(t, 4000, fixed.pace(), "no controller: the configured rate")
}
