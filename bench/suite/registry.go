package main

import (
	"fmt"
	"strings"
	"time"
)

// Scenario is one entry of the suite: a Go benchmark run once.
type Scenario struct {
	Name      string        // as SCENARIO= picks it and as the Result names itself
	Dir       string        // module directory, relative to the repository root
	Package   string        // package path, relative to Dir
	Benchmark string        // BenchmarkScenario…
	Budget    time.Duration // wall time at BENCH_SCALE=1
}

// registry is every scenario, in the order the suite runs them (BENCH-CONTRACT: the whole
// suite stays within 20 minutes at BENCH_SCALE=1 on the project's 2-core machine). The
// first scenario runs on a stack `make bench` has just started, whose broker compiles and
// whose services settle for minutes: memory, whose figure (peak RSS) a busy machine does not
// move, goes first, and sends a million deliveries through PostgreSQL and Kafka for the
// scenarios after it. The relay scenario, whose tail is measured in milliseconds, comes
// after the scenarios that send through Kafka the most, and after two light ones, so that
// seed-load's load is a minute behind (docs/benchmarks.md, "The relay on a broker that has
// served", "The first scenario on a fresh stack").
var registry = []Scenario{
	{"memory", ".", "./bench/memory", "BenchmarkScenarioMemory", 3 * time.Minute},
	{"ingest", ".", "./bench/ingest", "BenchmarkScenarioIngest", 2 * time.Minute},
	{"otp-under-campaign", ".", "./bench/e2e", "BenchmarkScenarioOTPUnderCampaign", 4 * time.Minute},
	{"throughput", ".", "./bench/e2e", "BenchmarkScenarioThroughput", 2 * time.Minute},
	{"seed-load", ".", "./bench/e2e", "BenchmarkScenarioSeedLoad", 3 * time.Minute},
	{"rate-limit", ".", "./bench/e2e", "BenchmarkScenarioRateLimit", time.Minute},
	{"failover", ".", "./dispatch/route", "BenchmarkScenarioFailover", time.Minute},
	{"relay", ".", "./bench/relay", "BenchmarkScenarioRelay", 4 * time.Minute},
	{"high-during-redrive", ".", "./bench/e2e", "BenchmarkScenarioHighDuringRedrive", 2 * time.Minute},
	{"events", ".", "./bench/e2e", "BenchmarkScenarioEvents", 3 * time.Minute},
	{"expansion", ".", "./bench/e2e", "BenchmarkScenarioExpansion", time.Minute},
	{"recovery", ".", "./bench/recovery", "BenchmarkScenarioRecovery", 2 * time.Minute},
}

// selectScenarios returns the scenarios a comma-separated list names, in registry order;
// an empty list is all of them.
func selectScenarios(list string) ([]Scenario, error) {
	if strings.TrimSpace(list) == "" {
		return registry, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []Scenario
	for _, s := range registry {
		if want[s.Name] {
			out = append(out, s)
			delete(want, s.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(names(registry), ", "))
	}
	return out, nil
}

func names(ss []Scenario) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

// timeout is the -test.timeout of a scenario: three times its budget at the scale, plus two
// minutes for setup (a stack that starts slowly, a build of herald inside the scenario).
func (s Scenario) timeout(scale float64) time.Duration {
	return time.Duration(float64(3*s.Budget)*scale) + 2*time.Minute
}
