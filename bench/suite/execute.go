package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/heraldhq/herald/bench/result"
)

// executor builds and runs scenarios for one run of the suite.
type executor struct {
	root   string  // repository root
	out    string  // the run's directory
	bin    string  // where test binaries are built (removed after the run)
	scale  float64 // BENCH_SCALE
	repeat int     // BENCH_REPEAT
	stdout io.Writer
	herald string // BENCH_HERALD_BIN for the scenarios that run herald as a child

	mu     sync.Mutex
	builds map[string]*testBuild // by test binary path
}

// buildHerald builds ./cmd/herald once for every scenario of the run (they would each link
// it otherwise), unless BENCH_HERALD_BIN names a binary to measure already.
func (e *executor) buildHerald(ctx context.Context, w io.Writer) error {
	if bin := os.Getenv("BENCH_HERALD_BIN"); bin != "" {
		e.herald = bin
		return nil
	}
	start := time.Now()
	bin := filepath.Join(e.bin, "herald")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/herald")
	cmd.Dir = e.root
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/herald: %w", err)
	}
	fmt.Fprintf(w, "=== go build ./cmd/herald (%.1fs)\n", time.Since(start).Seconds())
	e.herald = bin
	return nil
}

// run builds (once per package) and runs one scenario repeat times, and returns its part of
// the run. It never fails the suite: what went wrong is the ScenarioRun's status.
func (e *executor) run(ctx context.Context, s Scenario) (sr ScenarioRun) {
	sr = ScenarioRun{Name: s.Name, Benchmark: s.Benchmark, Log: s.Name + ".log", LoadBefore: loadAvg()}
	defer func() { sr.LoadAfter = loadAvg() }()
	logf, err := os.Create(filepath.Join(e.out, sr.Log))
	if err != nil {
		sr.Status, sr.Error = StatusFailed, err.Error()
		return sr
	}
	defer logf.Close()
	w := io.MultiWriter(e.stdout, logf)
	fmt.Fprintf(w, "=== scenario %s (%s in %s), BENCH_SCALE=%g, load average %s\n", s.Name, s.Benchmark, s.Package, e.scale, sr.LoadBefore)

	pkgDir := filepath.Join(e.root, s.Dir, s.Package)
	if _, err := os.Stat(pkgDir); err != nil {
		sr.Status, sr.Error = StatusMissing, fmt.Sprintf("package %s does not exist", s.Package)
		fmt.Fprintln(w, "--- "+sr.Error)
		return sr
	}
	bin, err := e.build(ctx, s, w)
	if err != nil {
		sr.Status, sr.Error = StatusBuildFailed, err.Error()
		fmt.Fprintln(w, "--- "+sr.Error)
		return sr
	}
	if ok, err := hasBenchmark(ctx, bin, pkgDir, s.Benchmark); err != nil || !ok {
		sr.Status, sr.Error = StatusMissing, fmt.Sprintf("%s has no %s", s.Package, s.Benchmark)
		if err != nil {
			sr.Status, sr.Error = StatusFailed, err.Error()
		}
		fmt.Fprintln(w, "--- "+sr.Error)
		return sr
	}
	for i := 1; i <= e.repeat; i++ {
		dir := e.out
		if i > 1 {
			dir = filepath.Join(e.out, "repeat"+strconv.Itoa(i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				sr.Status, sr.Error = StatusFailed, err.Error()
				return sr
			}
		}
		wall, cpu, err := e.exec(ctx, s, bin, pkgDir, dir, w)
		sr.Wall += wall.Seconds()
		sr.CPU += cpu.Seconds()
		if err != nil {
			sr.Status, sr.Error = StatusFailed, err.Error()
			fmt.Fprintln(w, "--- "+sr.Error)
			return sr
		}
		r, err := result.Read(filepath.Join(dir, s.Name+".json"))
		if err != nil {
			sr.Status, sr.Error = StatusNoResult, fmt.Sprintf("%s exited 0 but wrote no result: %v", s.Benchmark, err)
			fmt.Fprintln(w, "--- "+sr.Error)
			return sr
		}
		if i == 1 {
			sr.Result = r
		} else {
			sr.Repeats = append(sr.Repeats, r)
		}
	}
	sr.Status = StatusOK
	fmt.Fprintf(w, "--- %s ok in %.1fs (CPU %.1fs)\n", s.Name, sr.Wall, sr.CPU)
	return sr
}

// testBuild is one package's go test -c, which may run ahead of its scenario.
type testBuild struct {
	done chan struct{}
	out  bytes.Buffer // the compiler's output, written to the scenario's log when it runs
	took time.Duration
	err  error
}

// binPath is where a scenario's package's test binary is built.
func (e *executor) binPath(s Scenario) string {
	return filepath.Join(e.bin, strings.NewReplacer("/", "_", ".", "_").Replace(filepath.Join(s.Dir, s.Package))+".test")
}

// prebuild starts the builds of every scenario's package in the background, as many at once
// as there are cores: linking a test binary takes seconds. awaitBuilds waits for them before
// the first scenario starts.
func (e *executor) prebuild(ctx context.Context, scenarios []Scenario) {
	sem := make(chan struct{}, runtime.NumCPU())
	for _, s := range scenarios {
		if _, err := os.Stat(filepath.Join(e.root, s.Dir, s.Package)); err != nil {
			continue
		}
		if b := e.startBuild(s); b != nil {
			go func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				e.compile(ctx, s, b)
			}()
		}
	}
}

// awaitBuilds waits until every build prebuild started has ended, and returns how long it
// waited: the first scenario used to run beside the builds of the others' packages, as many
// compilers as cores, for up to half a minute (docs/benchmarks.md, "The first scenario on a
// fresh stack").
func (e *executor) awaitBuilds() time.Duration {
	start := time.Now()
	e.mu.Lock()
	builds := make([]*testBuild, 0, len(e.builds))
	for _, b := range e.builds {
		builds = append(builds, b)
	}
	e.mu.Unlock()
	for _, b := range builds {
		<-b.done
	}
	return time.Since(start)
}

// startBuild registers the package's build and returns it, or nil when it is registered already.
func (e *executor) startBuild(s Scenario) *testBuild {
	e.mu.Lock()
	defer e.mu.Unlock()
	bin := e.binPath(s)
	if _, ok := e.builds[bin]; ok {
		return nil
	}
	b := &testBuild{done: make(chan struct{})}
	e.builds[bin] = b
	return b
}

func (e *executor) compile(ctx context.Context, s Scenario, b *testBuild) {
	defer close(b.done)
	bin := e.binPath(s)
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, s.Package)
	cmd.Dir = filepath.Join(e.root, s.Dir)
	cmd.Stdout, cmd.Stderr = &b.out, &b.out
	err := cmd.Run()
	b.took = time.Since(start)
	if err != nil {
		b.err = fmt.Errorf("go test -c %s: %w", s.Package, err)
	} else if _, statErr := os.Stat(bin); statErr != nil {
		b.err = fmt.Errorf("go test -c %s wrote no binary (no test files?)", s.Package)
	}
}

// build returns the scenario's test binary, once built (by prebuild, or here), and copies
// the build's output to w.
func (e *executor) build(ctx context.Context, s Scenario, w io.Writer) (string, error) {
	if b := e.startBuild(s); b != nil {
		e.compile(ctx, s, b)
	}
	e.mu.Lock()
	b := e.builds[e.binPath(s)]
	e.mu.Unlock()
	select {
	case <-b.done:
	case <-ctx.Done():
		return "", fmt.Errorf("build of %s: %w", s.Package, ctx.Err())
	}
	_, _ = w.Write(b.out.Bytes())
	fmt.Fprintf(w, "=== go test -c %s (%.1fs)\n", s.Package, b.took.Seconds())
	return e.binPath(s), b.err
}

// hasBenchmark lists the binary's benchmarks matching the scenario's name.
func hasBenchmark(ctx context.Context, bin, dir, name string) (bool, error) {
	cmd := exec.CommandContext(ctx, bin, "-test.list", "^"+name+"$")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("%s -test.list: %w", filepath.Base(bin), err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == name {
			return true, nil
		}
	}
	return false, nil
}

// exec runs the benchmark once, its output streamed to w, and returns its wall time and the
// CPU time (user + system) of the process and the children it waited for.
func (e *executor) exec(ctx context.Context, s Scenario, bin, pkgDir, resultDir string, w io.Writer) (time.Duration, time.Duration, error) {
	timeout := s.timeout(e.scale)
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute) // -test.timeout fires first
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", "^"+s.Benchmark+"$",
		"-test.benchtime", "1x", "-test.timeout", timeout.String(), "-test.v")
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "BENCH_RESULT_DIR="+resultDir, "BENCH_SCALE="+strconv.FormatFloat(e.scale, 'g', -1, 64))
	if e.herald != "" {
		cmd.Env = append(cmd.Env, "BENCH_HERALD_BIN="+e.herald)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var cpu time.Duration
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return wall, cpu, fmt.Errorf("%s exited with %s", s.Benchmark, ee.ProcessState)
		}
		return wall, cpu, fmt.Errorf("run %s: %w", s.Benchmark, err)
	}
	return wall, cpu, nil
}
