package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/bench/result"
)

// Report section headings: the completeness check looks for them.
const (
	headMachine  = "## Machine"
	headSummary  = "## Summary"
	headScenario = "## Scenario: "
	headFigures  = "### Figures"
	headCharts   = "### Charts"
	headCompare  = "### Compared with the previous run"
)

// previous is the run a report compares with (nil: none on this machine at this scale).
type previous struct {
	Run *Run
	Dir string // its directory name, e.g. 20261130T141500Z
}

// renderReport writes report.md of run. noise gives each figure key's flag threshold.
func renderReport(run *Run, dir string, prev previous, noise func(string) float64) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# herald bench report %s\n\n", dir)
	p("BENCH_SCALE=%g, BENCH_REPEAT=%d, %s → %s (%s), commit %s%s.\n\n", run.Scale, run.Repeat,
		run.Started.Format(time.RFC3339), run.Finished.Format(time.RFC3339),
		run.Finished.Sub(run.Started).Round(time.Second), short(run.Machine.Commit), dirty(run.Machine.Dirty))
	p("Every scenario runs against the local stack (PostgreSQL, Kafka, Redis) on this machine, with " +
		"the load generator open loop (latency counted from when a request or row was due). Figures " +
		"taken at a BENCH_SCALE below 1 are smoke figures, not the machine's capacity.\n\n")

	m := run.Machine
	p("%s\n\n| fact | value |\n|---|---|\n", headMachine)
	for _, f := range [][2]string{
		{"CPU", m.CPUModel}, {"cores", strconv.Itoa(m.Cores)}, {"memory", fmt.Sprintf("%d MB", m.MemoryMB)},
		{"kernel", m.Kernel}, {"Go", m.Go}, {"PostgreSQL", m.PostgreSQL}, {"Kafka", m.Kafka}, {"Redis", m.Redis},
		{"commit", m.Commit + dirty(m.Dirty)}, {"load average before the run", run.LoadBefore},
		{"load average after the run", run.LoadAfter},
	} {
		p("| %s | %s |\n", f[0], cell(f[1]))
	}

	p("\n%s\n\n", headSummary)
	p("| scenario | status | figures with a target | wall | CPU share |\n|---|---|---|---|---|\n")
	for _, s := range run.Scenarios {
		p("| %s | %s | %s | %.0f s | %s |\n", s.Name, statusMark(s.Status),
			cell(targetSummary(s)), s.Wall, share(s, m.Cores))
	}
	p("\nCPU share: user + system CPU time of the scenario's process (and of the processes it started "+
		"and waited for) over its wall time × %d cores. Most scenarios run herald in-process (API, relay "+
		"and dispatch as goroutines beside the load generator); ingest and memory start `herald serve` as a "+
		"child process, which counts too. So this is the load generator and herald together, an upper bound "+
		"of the load generator's share; scenarios that can tell them apart report the load generator's own "+
		"CPU as a figure.\n", m.Cores)

	for _, s := range run.Scenarios {
		renderScenario(&b, s, prev, noise)
	}
	return b.String()
}

func renderScenario(b *strings.Builder, s ScenarioRun, prev previous, noise func(string) float64) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	title := ""
	if s.Result != nil {
		title = " — " + s.Result.Title
	}
	p("\n%s%s%s\n\n", headScenario, s.Name, title)
	p("Status: %s. Benchmark `%s`, wall %.1f s, CPU %.1f s, load average before %s, after %s. Log: [%s](%s).\n",
		statusMark(s.Status), s.Benchmark, s.Wall, s.CPU, s.LoadBefore, s.LoadAfter, s.Log, s.Log)
	if s.Error != "" {
		p("\n**%s**: %s\n", s.Status, s.Error)
	}
	r := s.Result
	if r == nil {
		p("\nNo figures: the scenario did not write a result.\n")
		return
	}
	p("\nLoad: %s (BENCH_SCALE=%g).\n", r.Load, r.Scale)
	if len(s.Repeats) > 0 {
		p("\nRun %d times (BENCH_REPEAT): the figures are the first run's; each figure's spread over the runs "+
			"(in results.json) is the noise threshold of the comparisons.\n", len(s.Repeats)+1)
	}

	p("\n%s\n\n| group | name | value | unit | target |\n|---|---|---|---|---|\n", headFigures)
	for _, f := range r.Figures {
		p("| %s | %s | %s | %s | %s |\n", cell(f.Group), cell(f.Name), formatValue(f.Value), cell(f.Unit), targetMark(f))
	}
	if len(r.Charts) > 0 {
		p("\n%s\n\n", headCharts)
		for _, c := range r.Charts {
			p("![%s](%s)\n\n", cell(c.Title), chartFile(s.Name, c))
		}
	}
	if len(r.Notes) > 0 {
		p("\n### Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
	p("\n%s\n\n", headCompare)
	if prev.Run == nil {
		p("No previous run on this machine (same CPU model and core count) at this BENCH_SCALE.\n")
		return
	}
	var ps *ScenarioRun
	for i := range prev.Run.Scenarios {
		if prev.Run.Scenarios[i].Name == s.Name && prev.Run.Scenarios[i].Result != nil {
			ps = &prev.Run.Scenarios[i]
		}
	}
	if ps == nil {
		p("The previous run on this machine (%s) has no result of %s.\n", prev.Dir, s.Name)
		return
	}
	changes := compareRuns(&Run{Scenarios: []ScenarioRun{*ps}}, &Run{Scenarios: []ScenarioRun{s}}, noise)
	p("Against %s (commit %s). A change beyond the noise threshold is flagged.\n\n", prev.Dir, short(prev.Run.Machine.Commit))
	p("| group | name | previous | this run | change | noise | |\n|---|---|---|---|---|---|---|\n")
	for _, c := range changes {
		p("| %s | %s | %s | %s | %s | %.0f %% | %s |\n", cell(c.Figure.Group), cell(c.Figure.Name),
			valueOr(c.A, c.HasA), valueOr(c.B, c.HasB), pct(c.Pct), c.Threshold, flagMark(c))
	}
}

// targetSummary lists a scenario's figures that have a target, with ✓ or ✗.
func targetSummary(s ScenarioRun) string {
	if s.Result == nil {
		return s.Error
	}
	var parts []string
	for _, f := range s.Result.Figures {
		if f.Target != "" {
			name := f.Name
			if f.Group != "" {
				name = f.Group + " " + name
			}
			parts = append(parts, fmt.Sprintf("%s %s %s (%s)", name, formatValue(f.Value), f.Unit, targetMark(f)))
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}

// targetMark is the target with ✓ (met), ✗ (missed) or ? (unreadable); "" without target.
func targetMark(f result.Figure) string {
	if f.Target == "" {
		return ""
	}
	met, ok := meetsTarget(f.Value, f.Target)
	switch {
	case !ok:
		return cell(f.Target) + " ?"
	case met:
		return cell(f.Target) + " ✓"
	default:
		return cell(f.Target) + " ✗"
	}
}

func statusMark(s string) string {
	if s == StatusOK {
		return "ok ✓"
	}
	return s + " ✗"
}

func flagMark(c Change) string {
	switch v := c.Verdict(); v {
	case "better":
		return "⚑ better"
	case "worse":
		return "⚑ worse"
	case "changed":
		return "⚑ changed"
	}
	return ""
}

func share(s ScenarioRun, cores int) string {
	if s.Wall <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %%", s.CPUShare(cores)*100)
}

// formatValue prints a figure with digits that matter: 12,345 / 123.4 / 1.23 / 0.0123.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e15:
		return thousands(strconv.FormatFloat(v, 'f', 0, 64))
	case a >= 1000:
		return thousands(strconv.FormatFloat(v, 'f', 0, 64))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1 || a == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func thousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func valueOr(v float64, ok bool) string {
	if !ok {
		return "—"
	}
	return formatValue(v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%+.1f %%", v)
}

func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }

func short(commit string) string {
	if len(commit) > 12 && !strings.Contains(commit, " ") {
		return commit[:12]
	}
	return commit
}

func dirty(d bool) string {
	if d {
		return " (with uncommitted changes)"
	}
	return ""
}
