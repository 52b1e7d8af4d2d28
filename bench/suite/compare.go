package main

import (
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/heraldhq/herald/bench/result"
)

// defaultNoisePct is the change (in %) beyond which a figure is flagged when no repeated run
// on the machine has measured the noise (BENCH_REPEAT=2 or more).
const defaultNoisePct = 10.0

// minNoisePct is the least threshold: two repeats that happen to agree closely do not make
// every later change a flag.
const minNoisePct = 2.0

// Change is one figure of run B against the same figure of run A.
type Change struct {
	Key       string
	Scenario  string
	Figure    result.Figure // B's, or A's when B lacks it
	A, B      float64
	HasA      bool
	HasB      bool
	Pct       float64 // (B − A) / |A| × 100; NaN when either is missing or A is 0
	Threshold float64 // the noise (%) beyond which the change is flagged
}

// Verdict is "better", "worse" or "" (within the noise, no direction known, or a figure
// present in one run only).
func (c Change) Verdict() string {
	if math.IsNaN(c.Pct) || math.Abs(c.Pct) <= c.Threshold {
		return ""
	}
	switch c.Figure.Better {
	case "higher":
		if c.Pct > 0 {
			return "better"
		}
		return "worse"
	case "lower":
		if c.Pct < 0 {
			return "better"
		}
		return "worse"
	}
	return "changed"
}

// Flagged tells whether the change is beyond the noise.
func (c Change) Flagged() bool { return c.Verdict() != "" }

// pctChange is (b − a) / |a| in percent; NaN when a is 0.
func pctChange(a, b float64) float64 {
	if a == 0 {
		if b == 0 {
			return 0
		}
		return math.NaN()
	}
	return (b - a) / math.Abs(a) * 100
}

// compareRuns matches the figures of a and b by scenario, group and name, in b's order
// (then a's figures b lacks). noise gives each key's threshold.
func compareRuns(a, b *Run, noise func(key string) float64) []Change {
	type fig struct {
		scenario string
		f        result.Figure
	}
	index := func(r *Run) (map[string]fig, []string) {
		m, order := map[string]fig{}, []string(nil)
		for _, s := range r.Scenarios {
			if s.Result == nil {
				continue
			}
			for _, f := range s.Result.Figures {
				k := figureKey(s.Name, f)
				if _, dup := m[k]; !dup {
					order = append(order, k)
				}
				m[k] = fig{s.Name, f}
			}
		}
		return m, order
	}
	am, aOrder := index(a)
	bm, bOrder := index(b)
	var out []Change
	seen := map[string]bool{}
	for _, k := range append(bOrder, aOrder...) {
		if seen[k] {
			continue
		}
		seen[k] = true
		fa, inA := am[k]
		fb, inB := bm[k]
		c := Change{Key: k, HasA: inA, HasB: inB, Pct: math.NaN(), Threshold: noise(k)}
		if inB {
			c.Scenario, c.Figure, c.B = fb.scenario, fb.f, fb.f.Value
		} else {
			c.Scenario, c.Figure = fa.scenario, fa.f
		}
		if inA {
			c.A = fa.f.Value
		}
		if inA && inB {
			c.Pct = pctChange(c.A, c.B)
		}
		out = append(out, c)
	}
	return out
}

// spreads computes each figure's noise over a scenario's repeats: (max − min) / mean in %.
func spreads(s ScenarioRun) map[string]Noise {
	if s.Result == nil || len(s.Repeats) == 0 {
		return nil
	}
	values := map[string][]float64{}
	for _, r := range append([]*result.Result{s.Result}, s.Repeats...) {
		for _, f := range r.Figures {
			k := figureKey(s.Name, f)
			values[k] = append(values[k], f.Value)
		}
	}
	out := map[string]Noise{}
	for k, vs := range values {
		if len(vs) < 2 {
			continue
		}
		lo, hi, sum := vs[0], vs[0], 0.0
		for _, v := range vs {
			lo, hi, sum = math.Min(lo, v), math.Max(hi, v), sum+v
		}
		mean := sum / float64(len(vs))
		spread := 0.0
		if mean != 0 {
			spread = (hi - lo) / math.Abs(mean) * 100
		}
		out[k] = Noise{Values: vs, SpreadPct: spread}
	}
	return out
}

// noiseFrom returns a key's threshold: the spread measured by the most recent repeated run
// among runs (newest first) that has the key, at least minNoisePct; else defaultNoisePct.
func noiseFrom(runs ...*Run) func(string) float64 {
	return func(key string) float64 {
		for _, r := range runs {
			if r == nil {
				continue
			}
			if n, ok := r.Noise[key]; ok {
				return math.Max(n.SpreadPct, minNoisePct)
			}
		}
		return defaultNoisePct
	}
}

// history lists the runs under outRoot (newest first) measured on the same machine at the
// same scale as cur, excluding the directory skip.
func history(outRoot, skip string, cur *Run) []*Run {
	dirs, _ := filepath.Glob(filepath.Join(outRoot, "*", "results.json"))
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	var out []*Run
	for _, p := range dirs {
		dir := filepath.Dir(p)
		if sameDir(dir, skip) || filepath.Base(dir) > filepath.Base(skip) {
			continue
		}
		if fi, err := os.Lstat(dir); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			continue
		}
		r, err := readRun(p)
		if err != nil || !r.Machine.sameMachine(cur.Machine) || r.Scale != cur.Scale {
			continue
		}
		out = append(out, r)
	}
	return out
}

func sameDir(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// meetsTarget checks a value against a target such as "≤ 25", ">= 0.6" or "≥ 5,000".
// ok is false when the target cannot be read.
func meetsTarget(v float64, target string) (met, ok bool) {
	t := strings.TrimSpace(target)
	var op string
	for _, p := range []string{"≤", "<=", "≥", ">=", "<", ">", "="} {
		if strings.HasPrefix(t, p) {
			op, t = p, strings.TrimSpace(strings.TrimPrefix(t, p))
			break
		}
	}
	if op == "" {
		return false, false
	}
	fields := strings.Fields(strings.ReplaceAll(t, ",", ""))
	if len(fields) == 0 {
		return false, false
	}
	want, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return false, false
	}
	switch op {
	case "≤", "<=":
		return v <= want, true
	case "≥", ">=":
		return v >= want, true
	case "<":
		return v < want, true
	case "=":
		return v == want, true
	default:
		return v > want, true
	}
}
