// Command suite runs herald's bench suite and reads its history (see docs/benchmarks.md):
//
//	suite [-scenario relay,ingest] [-scale 0.1] [-repeat 2]   run scenarios, write bench/out/<UTC time>/
//	suite compare bench/out/A bench/out/B                      two runs' figures side by side
//	suite check [-scenario …] bench/out/latest                 is a run's output complete (CI)
//	suite report bench/out/latest                              redraw a run's charts and report.md
//
// Each scenario is a Go benchmark (BenchmarkScenario…) that writes a bench/result.Result; the
// suite builds each package's test binary once, runs the benchmark once per repeat, and
// collects results.json, report.md and the PNG charts (drawn here with gonum/plot, which is
// why this is a module of its own: herald's go.mod stays free of it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/heraldhq/herald/bench/result"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = runCmd(ctx, args, os.Stdout)
	case "compare":
		err = compareCmd(args, os.Stdout)
	case "check":
		err = checkCmd(args, os.Stdout)
	case "report":
		err = reportCmd(args, os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q: want run, compare, check or report", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench suite:", err)
		os.Exit(1)
	}
}

func runCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	list := fs.String("scenario", os.Getenv("SCENARIO"), "comma-separated scenarios (env SCENARIO; default all, in registry order)")
	scale := fs.Float64("scale", result.Scale(), "BENCH_SCALE: factor of every size and duration")
	repeat := fs.Int("repeat", envInt("BENCH_REPEAT", 1), "BENCH_REPEAT: run each scenario this often to measure the noise")
	root := fs.String("root", "", "repository root (default: git's top level)")
	outRoot := fs.String("out", "", "where run directories are written (default <root>/bench/out)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *scale <= 0 || *repeat < 1 {
		return errors.New("-scale must be positive and -repeat at least 1")
	}
	scenarios, err := selectScenarios(*list)
	if err != nil {
		return err
	}
	if *root == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			return fmt.Errorf("find the repository root: %w", err)
		}
		*root = strings.TrimSpace(string(out))
	}
	if *outRoot == "" {
		*outRoot = filepath.Join(*root, "bench", "out")
	}
	started := time.Now().UTC()
	dir := filepath.Join(*outRoot, started.Format("20060102T150405Z"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	bin, err := os.MkdirTemp("", "herald-bench-bin-")
	if err != nil {
		return fmt.Errorf("create build directory: %w", err)
	}
	defer os.RemoveAll(bin)

	machineStart := time.Now()
	run := &Run{Started: started, Scale: *scale, Repeat: *repeat, LoadBefore: loadAvg(), Noise: map[string]Noise{}}
	run.Machine = readMachine(ctx, *root)
	fmt.Fprintf(stdout, "bench suite: machine facts read in %.1fs\n", time.Since(machineStart).Seconds())
	fmt.Fprintf(stdout, "bench suite: %s → %s (BENCH_SCALE=%g, BENCH_REPEAT=%d)\n", strings.Join(names(scenarios), ", "), dir, *scale, *repeat)
	e := &executor{root: *root, out: dir, bin: bin, scale: *scale, repeat: *repeat, stdout: stdout, builds: map[string]*testBuild{}}
	e.prebuild(ctx, scenarios)
	// Scenarios that run herald as a child get one binary, built here; without it each
	// builds its own (BuildHerald), so a failed build here is not the end of the run.
	if err := e.buildHerald(ctx, stdout); err != nil {
		fmt.Fprintf(stdout, "bench suite: %v; each scenario builds herald itself\n", err)
	}
	fmt.Fprintf(stdout, "bench suite: waited %.1fs for the scenarios' test binaries\n", e.awaitBuilds().Seconds())
	for _, s := range scenarios {
		if ctx.Err() != nil {
			run.Scenarios = append(run.Scenarios, ScenarioRun{Name: s.Name, Benchmark: s.Benchmark, Status: StatusFailed, Error: "interrupted", Log: s.Name + ".log"})
			continue
		}
		run.Scenarios = append(run.Scenarios, e.run(ctx, s))
	}
	run.Finished, run.LoadAfter = time.Now().UTC(), loadAvg()
	if err := writeOutput(dir, *outRoot, run); err != nil {
		return err
	}
	latest := filepath.Join(*outRoot, "latest")
	_ = os.Remove(latest)
	_ = os.Symlink(filepath.Base(dir), latest)

	fmt.Fprintf(stdout, "\nbench suite: %s in %s\n", dir, run.Finished.Sub(run.Started).Round(time.Second))
	var failed []string
	for _, s := range run.Scenarios {
		fmt.Fprintf(stdout, "  %-20s %-12s %6.1fs  %s\n", s.Name, s.Status, s.Wall, targetSummary(s))
		if s.Status != StatusOK {
			failed = append(failed, s.Name+" ("+s.Status+")")
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("not ok: %s (report written: %s)", strings.Join(failed, ", "), filepath.Join(dir, "report.md"))
	}
	return nil
}

// writeOutput draws the charts, computes the noise of repeated scenarios and writes
// results.json and report.md (compared with the previous run under outRoot on this machine).
func writeOutput(dir, outRoot string, run *Run) error {
	run.Noise = map[string]Noise{}
	for i := range run.Scenarios {
		sr := &run.Scenarios[i]
		if sr.Result != nil {
			files, err := drawCharts(dir, sr.Result)
			sr.ChartFiles = files
			if err != nil {
				sr.Status, sr.Error = StatusFailed, err.Error()
			}
		}
		for k, n := range spreads(*sr) {
			run.Noise[k] = n
		}
	}
	if err := writeRun(filepath.Join(dir, "results.json"), run); err != nil {
		return err
	}
	past := history(outRoot, dir, run)
	var prev previous
	if len(past) > 0 {
		prev = previous{Run: past[0], Dir: past[0].Started.Format("20060102T150405Z")}
	}
	report := renderReport(run, filepath.Base(dir), prev, noiseFrom(append([]*Run{run}, past...)...))
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(report), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// reportCmd redraws a run's charts and report.md from its results.json (after a change of
// the suite's report, say).
func reportCmd(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: suite report RUN_DIR")
	}
	dir, err := filepath.EvalSymlinks(args[0])
	if err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	run, err := readRun(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	if err := writeOutput(dir, filepath.Dir(dir), run); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s rewritten\n", filepath.Join(dir, "report.md"))
	return nil
}

func checkCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	list := fs.String("scenario", os.Getenv("SCENARIO"), "scenarios that must be complete (default all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: suite check [-scenario a,b] RUN_DIR")
	}
	scenarios, err := selectScenarios(*list)
	if err != nil {
		return err
	}
	if err := checkRun(fs.Arg(0), scenarios); err != nil {
		return fmt.Errorf("%s is incomplete:\n%w", fs.Arg(0), err)
	}
	fmt.Fprintf(stdout, "%s is complete: %s\n", fs.Arg(0), strings.Join(names(scenarios), ", "))
	return nil
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}
