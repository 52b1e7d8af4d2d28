package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/heraldhq/herald/bench/result"
)

// Status of a scenario in a run.
const (
	StatusOK          = "ok"
	StatusMissing     = "missing"      // its package or benchmark does not exist (yet)
	StatusBuildFailed = "build failed" // go test -c failed
	StatusFailed      = "failed"       // the benchmark exited non-zero (or timed out)
	StatusNoResult    = "no result"    // it exited 0 but wrote no <scenario>.json
)

// Run is results.json: one run of the suite.
type Run struct {
	Started    time.Time        `json:"started"`
	Finished   time.Time        `json:"finished"`
	Scale      float64          `json:"scale"`
	Repeat     int              `json:"repeat"` // BENCH_REPEAT: how often each scenario ran
	Machine    Machine          `json:"machine"`
	LoadBefore string           `json:"loadBefore"` // /proc/loadavg's first three fields
	LoadAfter  string           `json:"loadAfter"`
	Scenarios  []ScenarioRun    `json:"scenarios"`
	Noise      map[string]Noise `json:"noise,omitempty"` // per figure key, when Repeat > 1
}

// ScenarioRun is one scenario's part of a run.
type ScenarioRun struct {
	Name       string           `json:"name"`
	Benchmark  string           `json:"benchmark"`
	Status     string           `json:"status"`
	Error      string           `json:"error,omitempty"`
	Log        string           `json:"log"`         // file name in the run directory
	Wall       float64          `json:"wallSeconds"` // of the benchmark process (all repeats)
	CPU        float64          `json:"cpuSeconds"`  // user + system of the benchmark process and its waited-for children
	LoadBefore string           `json:"loadBefore"`
	LoadAfter  string           `json:"loadAfter"`
	Result     *result.Result   `json:"result,omitempty"`  // the first repeat's
	Repeats    []*result.Result `json:"repeats,omitempty"` // the others, when BENCH_REPEAT > 1
	ChartFiles []string         `json:"chartFiles,omitempty"`
}

// Noise is the spread of one figure over the repeats of a run: (max − min) / mean.
type Noise struct {
	Values    []float64 `json:"values"`
	SpreadPct float64   `json:"spreadPct"`
}

// CPUShare is the benchmark process's CPU time over the wall time of all cores.
func (s ScenarioRun) CPUShare(cores int) float64 {
	if s.Wall <= 0 || cores <= 0 {
		return 0
	}
	return s.CPU / (s.Wall * float64(cores))
}

// figureKey is how runs are matched: scenario, group and name.
func figureKey(scenario string, f result.Figure) string {
	return scenario + " / " + f.Group + " / " + f.Name
}

// readRun loads a results.json.
func readRun(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode run %s: %w", path, err)
	}
	return &r, nil
}

func writeRun(path string, r *Run) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode run: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write run: %w", err)
	}
	return nil
}
