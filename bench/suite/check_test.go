package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeFixtureRun writes what the suite writes for fixtureRun into a directory: charts,
// logs, results.json, report.md.
func writeFixtureRun(t *testing.T, run *Run) string {
	t.Helper()
	dir := t.TempDir()
	for i, s := range run.Scenarios {
		require.NoError(t, os.WriteFile(filepath.Join(dir, s.Log), []byte("log\n"), 0o644))
		if s.Result != nil {
			files, err := drawCharts(dir, s.Result)
			require.NoError(t, err)
			run.Scenarios[i].ChartFiles = files
		}
	}
	require.NoError(t, writeRun(filepath.Join(dir, "results.json"), run))
	md := renderReport(run, filepath.Base(dir), previous{}, noiseFrom())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "report.md"), []byte(md), 0o644))
	return dir
}

func scenarios(t *testing.T, list string) []Scenario {
	t.Helper()
	s, err := selectScenarios(list)
	require.NoError(t, err)
	return s
}

func TestCheckPassesACompleteRun(t *testing.T) {
	dir := writeFixtureRun(t, fixtureRun(6000))
	require.NoError(t, checkRun(dir, scenarios(t, "throughput")))
}

func TestCheckCatchesAMissingChart(t *testing.T) {
	dir := writeFixtureRun(t, fixtureRun(6000))
	require.NoError(t, os.Remove(filepath.Join(dir, "throughput-latency.png")))
	err := checkRun(dir, scenarios(t, "throughput"))
	require.ErrorContains(t, err, "chart throughput-latency.png missing")
}

func TestCheckCatchesAChartTheReportDoesNotShow(t *testing.T) {
	run := fixtureRun(6000)
	dir := writeFixtureRun(t, run)
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	cut := []byte("![calls per second](throughput-rate.png)")
	require.Contains(t, string(md), string(cut))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "report.md"), []byte(strings.ReplaceAll(string(md), string(cut), "")), 0o644))
	require.ErrorContains(t, checkRun(dir, scenarios(t, "throughput")), "does not show chart throughput-rate.png")
}

func TestCheckCatchesMissingAndFailedScenarios(t *testing.T) {
	dir := writeFixtureRun(t, fixtureRun(6000))
	err := checkRun(dir, scenarios(t, "")) // every registered scenario
	require.ErrorContains(t, err, "scenario relay did not run")
	require.ErrorContains(t, err, "scenario memory did not run")
	require.ErrorContains(t, err, "scenario recovery: status missing")
	require.NotContains(t, err.Error(), "scenario throughput")
}

func TestCheckCatchesAMissingSectionAndBadJSON(t *testing.T) {
	dir := writeFixtureRun(t, fixtureRun(6000))
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "report.md"), []byte(strings.ReplaceAll(string(md), "## Machine", "## Host")), 0o644))
	require.ErrorContains(t, checkRun(dir, scenarios(t, "throughput")), `no "## Machine" section`)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "results.json"), []byte("{"), 0o644))
	require.ErrorContains(t, checkRun(dir, scenarios(t, "throughput")), "decode run")
}

func TestChartsArePNGs(t *testing.T) {
	dir := writeFixtureRun(t, fixtureRun(6000))
	for _, f := range []string{"throughput-rate.png", "throughput-latency.png"} {
		file, err := os.Open(filepath.Join(dir, f))
		require.NoError(t, err)
		img, err := png.Decode(file)
		file.Close()
		require.NoError(t, err, f)
		require.Greater(t, img.Bounds().Dx(), 500)
	}
	// A log axis with nothing positive to show draws an empty chart rather than failing.
	c := fixtureRun(1).Scenarios[0].Result.Charts[1]
	c.Series[0].X = []float64{0}
	require.NoError(t, drawChart(filepath.Join(dir, "empty.png"), c))
}

func TestHistoryIsTheSameMachineAtTheSameScale(t *testing.T) {
	root := t.TempDir()
	write := func(name string, r *Run) {
		require.NoError(t, os.MkdirAll(filepath.Join(root, name), 0o755))
		require.NoError(t, writeRun(filepath.Join(root, name, "results.json"), r))
	}
	cur := fixtureRun(1)
	other := fixtureRun(2)
	other.Machine.Cores = 8
	bigger := fixtureRun(3)
	bigger.Scale = 1
	write("20261128T000000Z", fixtureRun(4))
	write("20261129T000000Z", other)
	write("20261129T120000Z", bigger)
	write("20261130T000000Z", cur)
	write("20261201T000000Z", fixtureRun(5)) // newer than the current run
	require.NoError(t, os.Symlink("20261128T000000Z", filepath.Join(root, "latest")))

	past := history(root, filepath.Join(root, "20261130T000000Z"), cur)
	require.Len(t, past, 1)
	require.Equal(t, 4.0, past[0].Scenarios[0].Result.Figures[0].Value)
}

func TestSelectScenarios(t *testing.T) {
	require.Equal(t, names(registry), names(scenarios(t, "")))
	require.Equal(t, []string{"memory", "ingest", "throughput"}, names(scenarios(t, "throughput, ingest,memory")), "registry order")
	_, err := selectScenarios("throughput,nope")
	require.ErrorContains(t, err, `unknown scenario "nope"`)
}
