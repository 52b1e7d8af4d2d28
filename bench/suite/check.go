package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// checkRun is the completeness check CI runs on a suite's output directory: results.json
// parses; every scenario of want ran with status ok and a result; report.md has the machine,
// summary and each scenario's sections; every chart a result describes exists as a PNG and
// is shown in the report; every log exists. It returns every problem found, joined.
func checkRun(dir string, want []Scenario) error {
	run, err := readRun(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	reportBytes, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		return fmt.Errorf("read report: %w", err)
	}
	report := string(reportBytes)
	var errs []error
	problem := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, h := range []string{headMachine, headSummary} {
		if !strings.Contains(report, "\n"+h+"\n") {
			problem("report.md has no %q section", h)
		}
	}
	if run.Machine.Cores == 0 || run.Machine.CPUModel == "" || run.LoadBefore == "" || run.LoadAfter == "" {
		problem("results.json lacks machine facts (CPU, cores, load average)")
	}
	byName := map[string]ScenarioRun{}
	for _, s := range run.Scenarios {
		byName[s.Name] = s
	}
	for _, sc := range want {
		s, ok := byName[sc.Name]
		if !ok {
			problem("scenario %s did not run", sc.Name)
			continue
		}
		if s.Status != StatusOK {
			problem("scenario %s: status %s: %s", sc.Name, s.Status, s.Error)
		}
		if _, err := os.Stat(filepath.Join(dir, s.Log)); err != nil {
			problem("scenario %s: log %s missing", sc.Name, s.Log)
		}
		section := scenarioSection(report, sc.Name)
		if section == "" {
			problem("report.md has no section for scenario %s", sc.Name)
		}
		if s.Result == nil {
			if s.Status == StatusOK {
				problem("scenario %s: no result", sc.Name)
			}
			continue
		}
		if len(s.Result.Figures) == 0 {
			problem("scenario %s: result has no figures", sc.Name)
		}
		if len(s.Result.Charts) == 0 {
			problem("scenario %s: result has no chart", sc.Name)
		}
		for _, h := range []string{headFigures, headCompare} {
			if !strings.Contains(section, "\n"+h) {
				problem("report.md: scenario %s has no %q", sc.Name, h)
			}
		}
		for _, c := range s.Result.Charts {
			f := chartFile(sc.Name, c)
			if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
				problem("scenario %s: chart %s missing", sc.Name, f)
			}
			if !strings.Contains(section, "]("+f+")") {
				problem("report.md: scenario %s does not show chart %s", sc.Name, f)
			}
		}
	}
	return errors.Join(errs...)
}

// scenarioSection is the part of the report from a scenario's heading to the next one.
func scenarioSection(report, name string) string {
	head := "\n" + headScenario + name
	i := 0
	for {
		j := strings.Index(report[i:], head)
		if j < 0 {
			return ""
		}
		i += j
		if end := i + len(head); end == len(report) || report[end] == ' ' || report[end] == '\n' {
			break
		}
		i += len(head)
	}
	rest := report[i+1:]
	if j := strings.Index(rest[1:], "\n"+headScenario); j >= 0 {
		return rest[:j+1]
	}
	return rest
}
