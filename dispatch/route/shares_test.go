package route

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShares(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int
		levels  []int
		want    []float64
	}{
		{"healthy primary and standby", []int{100, 0}, []int{0, 0}, []float64{1, 0}},
		{"primary one step down: a quarter to the standby", []int{100, 0}, []int{1, 0}, []float64{0.75, 0.25}},
		{"primary two steps down", []int{100, 0}, []int{2, 0}, []float64{0.5, 0.5}},
		{"primary at the last step", []int{100, 0}, []int{4, 0}, []float64{0, 1}},
		{"two primaries: the healthy one takes what the other gives up, the standby nothing",
			[]int{60, 40, 0}, []int{2, 0, 0}, []float64{0.3, 0.7, 0}},
		{"both primaries degraded: the standby takes what they gave up", []int{50, 50, 0}, []int{2, 4, 0},
			[]float64{0.25, 0, 0.75}},
		{"two healthy standbys share equally", []int{100, 0, 0}, []int{4, 0, 0}, []float64{0, 0.5, 0.5}},
		{"standby degraded too: the primary keeps its reduced weight", []int{100, 0}, []int{2, 4}, []float64{1, 0}},
		{"everything at the last step: the configured weights", []int{70, 30, 0}, []int{4, 4, 4}, []float64{0.7, 0.3, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shares(tc.weights, tc.levels, 4)
			require.InDeltaSlice(t, tc.want, got, 1e-9)
		})
	}
}

func TestFailoverShares(t *testing.T) {
	// A healthy primary's first failure: the retry goes to the standby, whose share is 0.
	require.InDeltaSlice(t, []float64{0, 1}, failoverShares([]int{100, 0}, []int{0, 0}, 4, 0), 1e-9)
	// Leaving the standby: back to the primary.
	require.InDeltaSlice(t, []float64{1, 0}, failoverShares([]int{100, 0}, []int{0, 0}, 4, 1), 1e-9)
	// Two others by their shares.
	require.InDeltaSlice(t, []float64{0, 1, 0}, failoverShares([]int{60, 40, 0}, []int{0, 0, 0}, 4, 0), 1e-9)
	// The other account takes nothing at all (its last step): the retry stays.
	require.InDeltaSlice(t, []float64{1, 0}, failoverShares([]int{100, 0}, []int{0, 4}, 4, 0), 1e-9)
}

func TestPick(t *testing.T) {
	sh := []float64{0.25, 0, 0.75}
	require.Equal(t, 0, pick(sh, 0))
	require.Equal(t, 0, pick(sh, 0.2499))
	require.Equal(t, 2, pick(sh, 0.25))
	require.Equal(t, 2, pick(sh, 0.999999))
	require.Equal(t, 2, pick(sh, 1)) // rounding past the sum: the last account with a share
}
