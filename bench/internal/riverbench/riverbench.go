// Package riverbench builds and runs bench/river, River's measurement on the local stack,
// for the scenarios that set River beside herald: the relay scenario's latencies and drain,
// and the throughput scenario's no-op drain. bench/river is a module of its own, so that
// herald's go.mod does not carry River; it is compiled here from its source.
package riverbench

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
