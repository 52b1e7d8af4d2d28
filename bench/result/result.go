// Package result is the bench suite's record of one scenario: the figures it measured, the
// series its charts draw, the load it applied. A scenario (a Go benchmark or program) fills a
// Result and, when the suite runs it, writes it as JSON to $BENCH_RESULT_DIR/<scenario>.json;
// the suite (bench/suite) collects those files into results.json, report.md and PNG charts.
//
// Run alone (no BENCH_RESULT_DIR), a scenario still prints its figures; Write does nothing.
package result

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Result is one scenario's run.
type Result struct {
	Scenario string    `json:"scenario"` // name as SCENARIO= picks it: "relay", "throughput", …
	Title    string    `json:"title"`    // one line: what it measures
	Load     string    `json:"load"`     // the load it applied, in words with numbers ("open loop, 1,000 rows/s for 20 s")
	Scale    float64   `json:"scale"`    // BENCH_SCALE it ran at
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Figures  []Figure  `json:"figures"`
	Charts   []Chart   `json:"charts,omitempty"`
	Notes    []string  `json:"notes,omitempty"` // what limits a figure, what was scaled, what to read with care
}

// Figure is one measured number.
type Figure struct {
	Name   string  `json:"name"`            // "commit → Kafka p99"
	Group  string  `json:"group,omitempty"` // what was measured, when a scenario compares several: "herald relay", "polling relay"
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`             // "ms", "rows/s", "MB", "count"
	Better string  `json:"better,omitempty"` // "lower" or "higher": which way is an improvement
	Target string  `json:"target,omitempty"` // the target of docs/benchmarks.md "Targets", as text: "≤ 10", "≥ 5000"
}

// Chart is one PNG the report shows.
type Chart struct {
	File   string   `json:"file"` // base name without extension, unique within the scenario
	Title  string   `json:"title"`
	Kind   string   `json:"kind"` // "line" (series over x) or "cdf" (x: latency, y: quantile)
	XLabel string   `json:"xLabel"`
	YLabel string   `json:"yLabel"`
	LogX   bool     `json:"logX,omitempty"`
	LogY   bool     `json:"logY,omitempty"`
	Series []Series `json:"series"`
}

// Series is one line of a chart.
type Series struct {
	Name string    `json:"name"`
	X    []float64 `json:"x"`
	Y    []float64 `json:"y"`
}

// New starts a Result for scenario at the current BENCH_SCALE.
func New(scenario, title string) *Result {
	return &Result{Scenario: scenario, Title: title, Scale: Scale(), Started: time.Now().UTC()}
}

// Add records a figure and returns the Result, so figures read as a list.
func (r *Result) Add(f Figure) *Result {
	r.Figures = append(r.Figures, f)
	return r
}

// Note records a sentence the report prints under the scenario's figures.
func (r *Result) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Chart records a chart.
func (r *Result) Chart(c Chart) { r.Charts = append(r.Charts, c) }

// Write stores the Result as $BENCH_RESULT_DIR/<scenario>.json; without BENCH_RESULT_DIR it
// does nothing, so a scenario run by hand only prints.
func (r *Result) Write() error {
	dir := os.Getenv("BENCH_RESULT_DIR")
	if dir == "" {
		return nil
	}
	r.Finished = time.Now().UTC()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result of %s: %w", r.Scenario, err)
	}
	if err := os.WriteFile(filepath.Join(dir, r.Scenario+".json"), b, 0o644); err != nil {
		return fmt.Errorf("write result of %s: %w", r.Scenario, err)
	}
	return nil
}

// Read loads a Result written by Write.
func Read(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode result %s: %w", path, err)
	}
	return &r, nil
}
