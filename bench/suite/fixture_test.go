package main

import (
	"time"

	"github.com/heraldhq/herald/bench/result"
)

// fixtureRun is a run of two scenarios: throughput ok (a figure meeting its target, one
// missing it, a line chart, a CDF chart, a note), recovery missing.
func fixtureRun(deliveries float64) *Run {
	at := time.Date(2026, 11, 30, 14, 15, 0, 0, time.UTC)
	r := &result.Result{Scenario: "throughput", Title: "end to end", Load: "1,000 NORMAL", Scale: 0.01, Started: at, Finished: at.Add(time.Minute)}
	r.Add(result.Figure{Name: "deliveries/s", Value: deliveries, Unit: "deliveries/s", Better: "higher", Target: "≥ 5000"})
	r.Add(result.Figure{Group: "open loop", Name: "p99", Value: 30, Unit: "ms", Better: "lower", Target: "≤ 25"})
	r.Add(result.Figure{Name: "provider calls", Value: 1000, Unit: "count"})
	r.Chart(result.Chart{File: "rate", Title: "calls per second", Kind: "line", XLabel: "s", YLabel: "calls/s",
		Series: []result.Series{{Name: "calls/s", X: []float64{0.5, 1.5, 2.5}, Y: []float64{100, 400, 350}}}})
	r.Chart(result.Chart{File: "latency", Title: "latency", Kind: "cdf", XLabel: "ms", LogX: true,
		Series: []result.Series{{Name: "herald", X: []float64{0, 1, 10, 100}, Y: []float64{0, 0.5, 0.99, 1}}}})
	r.Note("a note on what limits the figure")
	return &Run{
		Started: at, Finished: at.Add(2 * time.Minute), Scale: 0.01, Repeat: 1,
		Machine:    Machine{CPUModel: "AMD EPYC", Cores: 2, MemoryMB: 24000, Go: "go1.26", Commit: "0123456789abcdef0123"},
		LoadBefore: "1.00 1.00 1.00", LoadAfter: "2.00 1.50 1.00",
		Scenarios: []ScenarioRun{
			{Name: "throughput", Benchmark: "BenchmarkScenarioThroughput", Status: StatusOK, Log: "throughput.log", Wall: 60, CPU: 30, Result: r},
			{Name: "recovery", Benchmark: "BenchmarkScenarioRecovery", Status: StatusMissing, Log: "recovery.log", Error: "package ./bench/recovery does not exist"},
		},
	}
}
