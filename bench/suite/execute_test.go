package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeBenchmarks is a package of scenario benchmarks: one that writes a result (its figure
// is BENCH_SCALE, so the test sees the variable arrive), one that fails, one that writes
// nothing.
const fakeBenchmarks = `package p

import (
	"os"
	"path/filepath"
	"testing"
)

func BenchmarkScenarioGood(b *testing.B) {
	body := ` + "`" + `{"scenario":"good","title":"t","figures":[{"name":"scale","value":` + "`" + ` + os.Getenv("BENCH_SCALE") + ` + "`" + `,"unit":"x"}]}` + "`" + `
	if err := os.WriteFile(filepath.Join(os.Getenv("BENCH_RESULT_DIR"), "good.json"), []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkScenarioBoom(b *testing.B) { b.Fatal("boom") }

func BenchmarkScenarioSilent(b *testing.B) {}
`

// fakeModule is a module with the package p of fakeBenchmarks.
func fakeModule(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module fake\n\ngo 1.26.0\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "p"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "p", "p_test.go"), []byte(fakeBenchmarks), 0o644))
	return root
}

func TestPrebuildBuildsEachPackageOnceAhead(t *testing.T) {
	root := fakeModule(t)
	e := &executor{root: root, out: t.TempDir(), bin: t.TempDir(), scale: 1, repeat: 1, stdout: io.Discard, builds: map[string]*testBuild{}}
	good := Scenario{Name: "good", Dir: ".", Package: "./p", Benchmark: "BenchmarkScenarioGood", Budget: time.Minute}
	boom := Scenario{Name: "boom", Dir: ".", Package: "./p", Benchmark: "BenchmarkScenarioBoom", Budget: time.Minute}
	absent := Scenario{Name: "absent", Dir: ".", Package: "./absent", Benchmark: "BenchmarkScenarioAbsent", Budget: time.Minute}
	e.prebuild(context.Background(), []Scenario{good, boom, absent})
	require.Len(t, e.builds, 1, "one build for p, none for a package that does not exist")
	for _, b := range e.builds {
		<-b.done
		require.NoError(t, b.err)
	}
	require.FileExists(t, e.binPath(good), "built before its scenario runs")
	require.Equal(t, StatusOK, e.run(context.Background(), good).Status)
}

func TestAwaitBuildsReturnsWhenEveryBuildHasEnded(t *testing.T) {
	root := fakeModule(t)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "q"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "q", "q_test.go"), []byte(strings.Replace(fakeBenchmarks, "package p", "package q", 1)), 0o644))
	e := &executor{root: root, out: t.TempDir(), bin: t.TempDir(), scale: 1, repeat: 1, stdout: io.Discard, builds: map[string]*testBuild{}}
	p := Scenario{Name: "good", Dir: ".", Package: "./p", Benchmark: "BenchmarkScenarioGood", Budget: time.Minute}
	q := Scenario{Name: "q", Dir: ".", Package: "./q", Benchmark: "BenchmarkScenarioGood", Budget: time.Minute}
	e.prebuild(context.Background(), []Scenario{p, q})
	require.Len(t, e.builds, 2)
	e.awaitBuilds()
	for bin, b := range e.builds {
		select {
		case <-b.done:
		default:
			t.Fatalf("the build of %s has not ended", bin)
		}
		require.NoError(t, b.err)
		require.FileExists(t, bin)
	}
}

func TestExecutorStatuses(t *testing.T) {
	root := fakeModule(t)
	out := t.TempDir()
	e := &executor{root: root, out: out, bin: t.TempDir(), scale: 0.25, repeat: 2, stdout: io.Discard, builds: map[string]*testBuild{}}
	run := func(name, pkg, bench string) ScenarioRun {
		return e.run(context.Background(), Scenario{Name: name, Dir: ".", Package: pkg, Benchmark: bench, Budget: time.Minute})
	}

	good := run("good", "./p", "BenchmarkScenarioGood")
	require.Equal(t, StatusOK, good.Status, good.Error)
	require.Equal(t, 0.25, good.Result.Figures[0].Value, "BENCH_SCALE reaches the benchmark")
	require.Len(t, good.Repeats, 1, "BENCH_REPEAT=2: one repeat besides the first")
	require.FileExists(t, filepath.Join(out, "repeat2", "good.json"))
	require.Greater(t, good.Wall, 0.0)
	require.NotEmpty(t, good.LoadBefore)
	require.NotEmpty(t, good.LoadAfter)
	log, err := os.ReadFile(filepath.Join(out, "good.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "BenchmarkScenarioGood")

	require.Equal(t, StatusFailed, run("boom", "./p", "BenchmarkScenarioBoom").Status)
	require.Equal(t, StatusNoResult, run("silent", "./p", "BenchmarkScenarioSilent").Status)
	require.Equal(t, StatusMissing, run("later", "./p", "BenchmarkScenarioLater").Status, "a benchmark not written yet")
	require.Equal(t, StatusMissing, run("elsewhere", "./q", "BenchmarkScenarioElsewhere").Status, "a package not written yet")
	require.Len(t, e.builds, 1, "one build per package")

	require.NoError(t, os.MkdirAll(filepath.Join(root, "broken"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "broken", "b_test.go"), []byte("package broken\nfunc x( {"), 0o644))
	require.Equal(t, StatusBuildFailed, run("broken", "./broken", "BenchmarkScenarioBroken").Status)
}
