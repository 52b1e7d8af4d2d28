// Package riverbench builds and runs bench/river, River's measurement on the local stack,
// for the scenarios that set River beside herald: the relay scenario's latencies and drain,
// and the throughput scenario's no-op drain. bench/river is a module of its own, so that
// herald's go.mod does not carry River; it is compiled here from its source.
package riverbench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// Build compiles bench/river and returns the binary, in tb's temporary directory. Call it
// before anything is measured: the build takes both cores for a while.
func Build(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("riverbench: no caller information to find bench/river")
	}
	bin := filepath.Join(tb.TempDir(), "river")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "river")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build bench/river: %v\n%s", err, out)
	}
	return bin
}

// Run runs River's measurement with args (bench/river's flags) on a scratch database of the
// local stack's PostgreSQL and returns its result: figures in group "River", its charts and
// notes. Its output lines go to tb's log, its progress to stderr.
func Run(tb testing.TB, bin string, args ...string) *result.Result {
	tb.Helper()
	dir := tb.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "BENCH_RESULT_DIR="+dir, "RIVER_BENCH_DATABASE_URL="+stacktest.PostgresURL(tb))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		tb.Log(line)
	}
	if err != nil {
		tb.Fatalf("bench/river: %v", err)
	}
	res, err := result.Read(filepath.Join(dir, "river.json"))
	heraldtest.Must(tb, err)
	return res
}

// Session is a run of bench/river whose latency phases are driven slice by slice (its
// -slices flag), so that another system's slices can run between River's, on the same
// machine at nearly the same moments.
type Session struct {
	tb    testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // bench/river's protocol lines
	done  chan error  // its exit
	out   []string    // its other output lines, read once done has been received
	dir   string
}

// The protocol lines of bench/river -slices on stdout.
const (
	sliceReady = "slices: ready"
	sliceDone  = "slice done"
)

// Start starts bench/river with -slices and args, and returns once its client is running
// and warmed up. Its other output lines go to tb's log when it ends, its progress to stderr.
func Start(tb testing.TB, bin string, args ...string) *Session {
	tb.Helper()
	s := &Session{tb: tb, dir: tb.TempDir(), lines: make(chan string, 1), done: make(chan error, 1)}
	s.cmd = exec.Command(bin, append([]string{"-slices"}, args...)...)
	s.cmd.Env = append(os.Environ(), "BENCH_RESULT_DIR="+s.dir, "RIVER_BENCH_DATABASE_URL="+stacktest.PostgresURL(tb))
	s.cmd.Stderr = os.Stderr
	var err error
	s.in, err = s.cmd.StdinPipe()
	heraldtest.Must(tb, err)
	out, err := s.cmd.StdoutPipe()
	heraldtest.Must(tb, err)
	heraldtest.Must(tb, s.cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); line == sliceReady || line == sliceDone {
				s.lines <- line
			} else {
				s.out = append(s.out, line)
			}
		}
		s.done <- s.cmd.Wait()
		close(s.lines)
	}()
	tb.Cleanup(func() { _ = s.cmd.Process.Kill() })
	s.expect(sliceReady)
	return s
}

// expect waits for bench/river's next protocol line, which must be want.
func (s *Session) expect(want string) {
	s.tb.Helper()
	if line, ok := <-s.lines; !ok {
		err := <-s.done
		s.tb.Fatalf("bench/river ended before %q: %v\n%s", want, err, strings.Join(s.out, "\n"))
	} else if line != want {
		s.tb.Fatalf("bench/river: got %q, want %q", line, want)
	}
}

// Slice runs one slice of River's phase at rate jobs/s for d, and returns once its jobs
// have started (or the run's tail passed).
func (s *Session) Slice(rate int, d time.Duration) {
	s.tb.Helper()
	_, err := fmt.Fprintf(s.in, "%d %s\n", rate, d)
	heraldtest.Must(s.tb, err)
	s.expect(sliceDone)
}

// Finish ends the slices; bench/river reports each rate over its slices, runs the rest of
// its measurement (the drain) and exits. It returns River's result, as Run does.
func (s *Session) Finish() *result.Result {
	s.tb.Helper()
	heraldtest.Must(s.tb, s.in.Close())
	for line := range s.lines {
		s.tb.Fatalf("bench/river: unexpected %q after the last slice", line)
	}
	err := <-s.done
	for _, line := range s.out {
		s.tb.Log(line)
	}
	if err != nil {
		s.tb.Fatalf("bench/river: %v", err)
	}
	res, err := result.Read(filepath.Join(s.dir, "river.json"))
	heraldtest.Must(s.tb, err)
	return res
}
