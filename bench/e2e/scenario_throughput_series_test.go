package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/dispatch"
)

func TestThroughputSeriesBucketsCallsAndBacklog(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(ms int) dispatch.Call { return dispatch.Call{At: start.Add(time.Duration(ms) * time.Millisecond)} }
	// 10 rows committed at 0.1 s and 5 more at 1.2 s; calls: 2 in second 0, none in second 1,
	// 12 in second 2 (out of order, as lanes record them).
	calls := []dispatch.Call{at(2500), at(200), at(900)}
	for i := 0; i < 11; i++ {
		calls = append(calls, at(2000+i))
	}
	committed := []time.Time{start.Add(100 * time.Millisecond), start.Add(1200 * time.Millisecond)}
	rate, left := throughputSeries(start, calls, committed, []int{10, 5})

	require.Equal(t, []float64{0.5, 1.5, 2.5}, rate.X)
	require.Equal(t, []float64{2, 0, 12}, rate.Y)
	require.Equal(t, []float64{1, 2, 3}, left.X)
	require.Equal(t, []float64{8, 13, 1}, left.Y, "committed by the end of each second minus calls by then")

	empty, none := throughputSeries(start, nil, committed, []int{10, 5})
	require.Empty(t, empty.X)
	require.Empty(t, none.X)
}
