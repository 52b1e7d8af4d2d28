package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReportShowsEverySectionAndTargets(t *testing.T) {
	run := fixtureRun(6000)
	md := renderReport(run, "20261130T141500Z", previous{}, noiseFrom())

	for _, want := range []string{
		"\n## Machine\n", "| CPU | AMD EPYC |", "| cores | 2 |", "| load average before the run | 1.00 1.00 1.00 |",
		"\n## Summary\n",
		"| throughput | ok ✓ | deliveries/s 6,000 deliveries/s (≥ 5000 ✓); open loop p99 30 ms (≤ 25 ✗) | 60 s | 25 % |",
		"| recovery | missing ✗ | package ./bench/recovery does not exist |",
		"\n## Scenario: throughput — end to end\n",
		"Load: 1,000 NORMAL (BENCH_SCALE=0.01).",
		"| open loop | p99 | 30 | ms | ≤ 25 ✗ |",
		"|  | provider calls | 1,000 | count |  |",
		"![calls per second](throughput-rate.png)", "![latency](throughput-latency.png)",
		"- a note on what limits the figure", "Log: [throughput.log](throughput.log)",
		"\n## Scenario: recovery\n", "**missing**: package ./bench/recovery does not exist",
		"No previous run on this machine",
		"herald in-process",
	} {
		require.Contains(t, md, want)
	}
}

func TestReportComparesWithThePreviousRun(t *testing.T) {
	prev, cur := fixtureRun(5000), fixtureRun(4000) // deliveries/s −20 %: beyond the default 10 %
	md := renderReport(cur, "20261130T141500Z", previous{Run: prev, Dir: "20261129T100000Z"}, noiseFrom())
	section := scenarioSection(md, "throughput")
	require.Contains(t, section, "Against 20261129T100000Z (commit 0123456789ab)")
	require.Contains(t, section, "|  | deliveries/s | 5,000 | 4,000 | -20.0 % | 10 % | ⚑ worse |")
	require.Contains(t, section, "| open loop | p99 | 30 | 30 | +0.0 % | 10 % |  |", "an unchanged figure is not flagged")
	require.Equal(t, 1, strings.Count(section, "| deliveries/s | 5,000 |"), "each figure compared once")
	require.Contains(t, scenarioSection(md, "recovery"), "No figures")

	// The same change within a measured noise of 25 % is not flagged.
	cur.Noise = map[string]Noise{"throughput /  / deliveries/s": {SpreadPct: 25}}
	md = renderReport(cur, "x", previous{Run: prev, Dir: "p"}, noiseFrom(cur))
	require.Contains(t, md, "|  | deliveries/s | 5,000 | 4,000 | -20.0 % | 25 % |  |")
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{12345.6: "12,346", 1000: "1,000", 123.4: "123", 12.34: "12.3",
		1.234: "1.23", 0.01234: "0.0123", 0: "0", -4500: "-4,500"} {
		require.Equal(t, want, formatValue(v), "%v", v)
	}
	require.Equal(t, `a\|b c`, cell("a|b\nc"), "a cell escapes the table's bars and joins lines")
}
