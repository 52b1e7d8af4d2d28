package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFaultRates(t *testing.T) {
	s := start(t, Config{Seed: 7, Faults: map[string]Faults{Twilio: {RateLimit: 0.2, Unavailable: 0.1, Permanent: 0.1}}})
	counts := map[Outcome]int{}
	for range 2000 {
		o, _, _ := s.dice.roll(Twilio)
		counts[o]++
	}
	// 2000 draws: each rate within ±4 percentage points (≈ 4.5 standard deviations).
	require.InDelta(t, 400, counts[RateLimited], 80)
	require.InDelta(t, 200, counts[Unavailable], 80)
	require.InDelta(t, 200, counts[Rejected], 80)
	require.InDelta(t, 1200, counts[Accepted], 80)
}

func TestLatencyDistribution(t *testing.T) {
	d := newDice(Config{Seed: 3})
	l := Latency{Median: 10 * time.Millisecond, P99: 100 * time.Millisecond}
	var below, above int
	for range 10000 {
		v := d.delay(l)
		if v < l.Median {
			below++
		}
		if v > l.P99 {
			above++
		}
	}
	require.InDelta(t, 5000, below, 300, "half below the median")
	require.InDelta(t, 100, above, 50, "one in a hundred above p99")
}
