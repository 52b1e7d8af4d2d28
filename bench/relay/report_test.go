package relay

import (
	"fmt"
	"testing"
	"time"

	"github.com/heraldhq/herald/bench/result"
)

// Chart files of the scenario; River's program writes its series into charts of the same
// files, and runRiver merges them.
const (
	chartCDF   = "latency-cdf"
	chartDrain = "drain"
)

func rateName(rate int) string { return fmt.Sprintf("%d rows/s", rate) }

// report records one latency phase of s: the figures, and its CDF as a series.
func (s *system) report(b *testing.B, res *result.Result, l latency) {
	name := rateName(l.rate)
	target99 := ""
	if s.name == groupHerald && l.rate == 1000 {
		target99 = "≤ 10"
	}
	res.Latencies(s.name, name, l.fromDue, target99)
	if target99 != "" {
		setTarget(res, s.name, name+" p50", "≤ 5")
	}
	ms := func(v int64) float64 { return float64(v) / 1000 }
	res.Add(result.Figure{Group: s.name, Name: name + " due → commit p50", Value: ms(l.insert.ValueAtQuantile(50)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " due → commit p99", Value: ms(l.insert.ValueAtQuantile(99)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " commit → visible p50", Value: ms(l.commit.ValueAtQuantile(50)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " commit → visible p99", Value: ms(l.commit.ValueAtQuantile(99)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " commit → Kafka ack p50", Value: ms(l.ack.ValueAtQuantile(50)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " commit → Kafka ack p99", Value: ms(l.ack.ValueAtQuantile(99)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " achieved", Value: l.load.Rate(), Unit: "rows/s", Better: "higher"}).
		Add(result.Figure{Group: s.name, Name: name + " behind schedule max", Value: float64(l.load.MaxBehind.Microseconds()) / 1000, Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " not sent", Value: float64(l.load.Skipped), Unit: "count", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " not visible", Value: float64(l.invisible), Unit: "count", Better: "lower"}).
		Add(result.Figure{Group: s.name, Name: name + " cluster WAL", Value: l.walRate / 1e6, Unit: "MB/s"})
	addSeries(res, chartCDF, result.CDF(fmt.Sprintf("%s %d/s", s.name, l.rate), l.fromDue))
	reportCPU(b, res, s.name, name, l.cpu)
	if l.otherCPU.took > 0 {
		reportCPU(b, res, groupRiver, name, l.otherCPU)
	}
	if l.stages != nil {
		l.stages.add(res, s.name, name)
		b.Logf("%s at %d rows/s, commit → Kafka ack from the relay: %s", s.name, l.rate, l.stages)
	}
	if l.requests != nil {
		l.requests.add(res, s.name, name)
		b.Logf("%s at %d rows/s: %s", s.name, l.rate, l.requests)
	}
	if l.load.Rate() < 0.95*float64(l.rate) {
		res.Note("The generator did not hold %d rows/s for %s: it achieved %.0f rows/s and fell up to %v behind its schedule "+
			"(%d inserts started over 1 ms late; %d due too late to start before the phase ended were not sent); "+
			"latency still counts from each row's due time.",
			l.rate, s.name, l.load.Rate(), l.load.MaxBehind.Round(1e6), l.load.Behind, l.load.Skipped)
	}
	b.Logf("%s at %d rows/s (achieved %.0f, up to %v behind): due → visible p50 %.2f ms, p90 %.2f, p99 %.2f, max %.2f; "+
		"due → commit p50 %.2f ms, p99 %.2f; commit → visible p50 %.2f ms, p99 %.2f; %d not visible; cluster WAL %.1f MB/s",
		s.name, l.rate, l.load.Rate(), l.load.MaxBehind.Round(1e5), ms(l.fromDue.ValueAtQuantile(50)), ms(l.fromDue.ValueAtQuantile(90)),
		ms(l.fromDue.ValueAtQuantile(99)), ms(l.fromDue.Max()), ms(l.insert.ValueAtQuantile(50)), ms(l.insert.ValueAtQuantile(99)),
		ms(l.commit.ValueAtQuantile(50)), ms(l.commit.ValueAtQuantile(99)), l.invisible, l.walRate/1e6)
}

// reportCPU records the cores the machine was busy with during group's slices of a phase:
// what the system's whole path costs at that rate, the generator's inserts included, on a
// machine whose other load falls on both systems' slices alike; and its parts: PostgreSQL
// (the inserts, and herald's walsender and mark or River's fetches and completions), and for
// herald and the polling relay this process (the relay, the generator and the watching
// consumer) and the broker. On a machine the systems share with their load, the tail after a
// stall lasts as long as the backlog takes to clear on the cores left over.
func reportCPU(b *testing.B, res *result.Result, group, name string, u cpuUse) {
	machine, postgres, self, broker := u.cores()
	res.Add(result.Figure{Group: group, Name: name + " machine busy", Value: machine, Unit: "cores", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " PostgreSQL busy", Value: postgres, Unit: "cores", Better: "lower"})
	if group == groupRiver { // its own process: the rest of the machine
		b.Logf("%s at %s: the machine busy %.2f cores, PostgreSQL %.2f, over %v of its slices", group, name, machine, postgres, u.took.Round(time.Millisecond))
		return
	}
	res.Add(result.Figure{Group: group, Name: name + " relay's process busy", Value: self, Unit: "cores", Better: "lower"})
	line := fmt.Sprintf("%s at %s: the machine busy %.2f cores, PostgreSQL %.2f, the relay's process (with the generator and the consumer) %.2f",
		group, name, machine, postgres, self)
	if u.brokerSeen {
		res.Add(result.Figure{Group: group, Name: name + " broker busy", Value: broker, Unit: "cores", Better: "lower"})
		line += fmt.Sprintf(", the broker %.2f", broker)
	}
	b.Logf("%s, over %v of its slices", line, u.took.Round(time.Millisecond))
}

// reportDrain records one drain of s, and the duplicate records s.watch saw in the whole run
// (at least once: a relay may publish a row again after a restart).
func (s *system) reportDrain(b *testing.B, res *result.Result, d drain) {
	target := ""
	if s.name == groupHerald {
		target = "≥ 10000"
	}
	res.Add(result.Figure{Group: s.name, Name: "drain", Value: d.rate(), Unit: "rows/s", Better: "higher", Target: target})
	res.Add(result.Figure{Group: s.name, Name: "drain seconds", Value: d.elapsed.Seconds(), Unit: "s", Better: "lower"})
	res.Add(result.Figure{Group: s.name, Name: "drain start-up", Value: d.first.Seconds(), Unit: "s", Better: "lower"})
	res.Add(result.Figure{Group: s.name, Name: "drain after start-up", Value: d.streamRate(), Unit: "rows/s", Better: "higher"})
	addSeries(res, chartDrain, d.curve)
	dups, bad := s.watch.anomalies()
	res.Add(result.Figure{Group: s.name, Name: "duplicate records", Value: float64(dups), Unit: "count", Better: "lower"})
	if bad > 0 {
		res.Note("%s: %d records were not herald's delivery message, or fetches failed.", s.name, bad)
	}
	if d.visible < d.rows {
		res.Note("%s drained %d of the %d-row backlog in %.1f s and was stopped there; its drain rate is over that window.",
			s.name, d.visible, d.rows, d.elapsed.Seconds())
	}
	b.Logf("%s drained %d of %d rows in %.2f s: %.0f rows/s (first row after %.2f s; %.0f rows/s from then on)",
		s.name, d.visible, d.rows, d.elapsed.Seconds(), d.rate(), d.first.Seconds(), d.streamRate())
}

// compare records how many times lower herald's p50 and p99 are than the polling relay's
// and River's at each rate (docs/benchmarks.md, "Targets": below River's, and at least 20×
// below polling).
func compare(b *testing.B, res *result.Result) {
	for _, peer := range []string{groupPolling, groupRiver} {
		for _, rate := range rates {
			for _, q := range []string{"p50", "p99"} {
				name := rateName(rate) + " " + q
				h, okH := figure(res, groupHerald, name)
				p, okP := figure(res, peer, name)
				if !okH || !okP || h <= 0 {
					continue
				}
				target := ""
				if peer == groupPolling {
					target = "≥ 20"
				}
				res.Add(result.Figure{Group: "herald vs " + peer, Name: name + " ratio", Value: p / h, Unit: "×", Better: "higher", Target: target})
				b.Logf("%s: herald %.2f ms, %s %.2f ms: %.1f× lower", name, h, peer, p, p/h)
			}
		}
	}
}

// charts fills in the titles and axes of the scenario's charts.
func charts(res *result.Result) {
	for i := range res.Charts {
		c := &res.Charts[i]
		switch c.File {
		case chartCDF:
			c.Title, c.Kind, c.XLabel, c.YLabel, c.LogX = "Due → visible latency per system and rate (CDF)", "cdf", "latency (ms, log)", "fraction of rows", true
		case chartDrain:
			c.Title, c.Kind, c.XLabel, c.YLabel = fmt.Sprintf("Drain of a %d-row backlog", backlogSize()), "line", "seconds since the relay started", "rows visible"
		}
	}
}

func addSeries(res *result.Result, file string, s result.Series) {
	for i := range res.Charts {
		if res.Charts[i].File == file {
			res.Charts[i].Series = append(res.Charts[i].Series, s)
			return
		}
	}
	res.Chart(result.Chart{File: file, Series: []result.Series{s}})
}

func figure(res *result.Result, group, name string) (float64, bool) {
	for _, f := range res.Figures {
		if f.Group == group && f.Name == name {
			return f.Value, true
		}
	}
	return 0, false
}

func setTarget(res *result.Result, group, name, target string) {
	for i := range res.Figures {
		if res.Figures[i].Group == group && res.Figures[i].Name == name {
			res.Figures[i].Target = target
		}
	}
}
