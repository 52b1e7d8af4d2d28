package main

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/bench/result"
)

func TestPctChange(t *testing.T) {
	require.InDelta(t, 10, pctChange(100, 110), 1e-9)
	require.InDelta(t, -25, pctChange(200, 150), 1e-9)
	require.InDelta(t, 50, pctChange(-2, -1), 1e-9, "against |a|: −2 → −1 is +50 %")
	require.Equal(t, 0.0, pctChange(0, 0))
	require.True(t, math.IsNaN(pctChange(0, 5)))
}

func TestVerdictFollowsBetter(t *testing.T) {
	for _, c := range []struct {
		better string
		pct    float64
		want   string
	}{
		{"higher", 20, "better"}, {"higher", -20, "worse"}, {"lower", 20, "worse"}, {"lower", -20, "better"},
		{"", 20, "changed"}, {"higher", 5, ""}, {"lower", -10, ""}, {"higher", math.NaN(), ""},
	} {
		ch := Change{Figure: result.Figure{Better: c.better}, Pct: c.pct, Threshold: 10}
		require.Equal(t, c.want, ch.Verdict(), "%s %v", c.better, c.pct)
	}
}

func TestCompareRunsMatchesByScenarioGroupAndName(t *testing.T) {
	a, b := fixtureRun(5000), fixtureRun(6000)
	// b lacks the p99 of a and has a figure a lacks.
	b.Scenarios[0].Result.Figures = append(b.Scenarios[0].Result.Figures[:1:1], b.Scenarios[0].Result.Figures[2],
		result.Figure{Name: "new", Value: 1, Unit: "count"})
	changes := compareRuns(a, b, noiseFrom())
	byKey := map[string]Change{}
	for _, c := range changes {
		byKey[c.Key] = c
	}
	require.Len(t, changes, 4)
	d := byKey["throughput /  / deliveries/s"]
	require.InDelta(t, 20, d.Pct, 1e-9)
	require.Equal(t, "better", d.Verdict())
	require.True(t, byKey["throughput / open loop / p99"].HasA)
	require.False(t, byKey["throughput / open loop / p99"].HasB)
	require.False(t, byKey["throughput /  / new"].HasA)
	require.Equal(t, "", byKey["throughput /  / new"].Verdict())

	var out bytes.Buffer
	writeComparison(&out, "A", "B", a, b)
	require.Contains(t, out.String(), "+20.0 %")
	require.Contains(t, out.String(), "better")
}

func TestNoiseFromRepeats(t *testing.T) {
	s := fixtureRun(1000).Scenarios[0]
	again := *s.Result
	again.Figures = []result.Figure{{Name: "deliveries/s", Value: 1200, Better: "higher"}}
	s.Repeats = []*result.Result{&again}
	n := spreads(s)
	require.InDelta(t, 200.0/1100*100, n["throughput /  / deliveries/s"].SpreadPct, 1e-9)
	_, only := n["throughput / open loop / p99"]
	require.False(t, only, "a figure measured once has no spread")

	older := &Run{Noise: map[string]Noise{"k": {SpreadPct: 4}, "tiny": {SpreadPct: 0.1}}}
	newer := &Run{Noise: map[string]Noise{"k": {SpreadPct: 7}}}
	noise := noiseFrom(newer, older)
	require.Equal(t, 7.0, noise("k"), "the newest measurement wins")
	require.Equal(t, minNoisePct, noise("tiny"))
	require.Equal(t, defaultNoisePct, noise("unmeasured"))
}

func TestMeetsTarget(t *testing.T) {
	for _, c := range []struct {
		v        float64
		target   string
		met, ran bool
	}{
		{5000, "≥ 5000", true, true}, {4999, "≥ 5,000", false, true}, {25, "≤ 25", true, true}, {25.1, "<= 25 ms", false, true},
		{0.61, ">= 0.6", true, true}, {1, "< 1", false, true}, {2, "> 1", true, true}, {1, "about 1", false, false}, {1, "≤ x", false, false},
		{0, "= 0", true, true}, {1, "= 0", false, true},
	} {
		met, ok := meetsTarget(c.v, c.target)
		require.Equal(t, c.ran, ok, c.target)
		require.Equal(t, c.met, met, "%v %s", c.v, c.target)
	}
}
