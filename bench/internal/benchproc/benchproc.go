// Package benchproc runs herald as a child process of a bench scenario: it builds the binary
// once, starts `herald serve` tied to the benchmark's life, and reads the child's memory and
// CPU time from /proc, so that a scenario measures herald apart from its own load generator.
package benchproc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/sleep"
)

// BuildHerald returns the herald binary to measure: $BENCH_HERALD_BIN when set (the suite
// builds herald once per run and sets it; by hand it measures a prebuilt binary, for A/B
// comparisons), else ./cmd/herald of the module the benchmark runs in, built into a
// temporary directory.
func BuildHerald(tb testing.TB) string {
	tb.Helper()
	if bin := os.Getenv("BENCH_HERALD_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			tb.Fatalf("BENCH_HERALD_BIN: %v", err)
		}
		return bin
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		tb.Fatalf("find herald's module: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(tb.TempDir(), "herald")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/herald")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build ./cmd/herald: %v\n%s", err, out)
	}
	return bin
}

// Proc is a running herald.
type Proc struct {
	Cmd  *exec.Cmd
	Log  string // its combined output
	done chan struct{}
}

// Start runs bin with args in the benchmark's environment, its output in a log file of the
// benchmark's temporary directory. The child dies with the benchmark (SIGKILL on the
// parent's death) and is stopped (SIGTERM, then SIGKILL after 10 s) when the benchmark ends,
// its last log lines printed if the benchmark failed; a cleanup registered before Start (a
// database to drop) runs after it has stopped.
func Start(tb testing.TB, bin string, args ...string) *Proc {
	tb.Helper()
	return start(tb, bin, "herald", os.Environ(), args...)
}

// StartEnv is Start for a process configured as an operator would: named name (its log and
// messages), with env on top of the benchmark's environment less its HERALD_* variables.
func StartEnv(tb testing.TB, bin, name string, env map[string]string, args ...string) *Proc {
	tb.Helper()
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			environ = append(environ, kv)
		}
	}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	return start(tb, bin, name, environ, args...)
}

func start(tb testing.TB, bin, name string, environ []string, args ...string) *Proc {
	tb.Helper()
	log := filepath.Join(tb.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		tb.Fatalf("create %s log: %v", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	p := &Proc{Cmd: cmd, Log: log, done: done}
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.Kill()
		}
		if tb.Failed() {
			tb.Logf("--- %s log (last 40 lines) ---\n%s", name, p.Tail(40))
		}
	})
	return p
}

// Kill is kill -9; it returns once the process is gone.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Alive tells whether the process still runs.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Tail is the last n lines of the process's log, for a failure message.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// StatusKB reads a "<field>: N kB" line of /proc/<pid>/status (VmRSS, VmHWM).
func (p *Proc) StatusKB(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read status of herald: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s of herald: %w", field, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.Cmd.Process.Pid)
}

// CPU is the process's user + system CPU time so far (/proc/<pid>/stat).
func (p *Proc) CPU() (time.Duration, error) {
	return CPUOf(p.Cmd.Process.Pid)
}

// WaitFor polls cond every interval until it holds, the process dies or timeout passes.
func (p *Proc) WaitFor(tb testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond() {
		if !p.Alive() {
			tb.Fatalf("herald exited while waiting for %s:\n%s", what, p.Tail(20))
		}
		if sleep.For(ctx, interval) != nil {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}
