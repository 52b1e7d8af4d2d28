package main

import (
	"fmt"

	"github.com/heraldhq/herald/bench/result"
)

// report records one phase under the figure names bench/relay uses for herald's and the
// polling relay's ("1000 rows/s p50", …): a job here stands for a delivery row there.
func (b *bench) report(p *phase) {
	rate, st, fromDue, insert, commit, invisible := p.rate, p.load, p.fromDue, p.insert, p.commit, p.invisible
	name := fmt.Sprintf("%d rows/s", rate)
	ms := func(v int64) float64 { return float64(v) / 1000 }
	b.res.Latencies(group, name, fromDue, "")
	b.res.Add(result.Figure{Group: group, Name: name + " due → commit p50", Value: ms(insert.ValueAtQuantile(50)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " due → commit p99", Value: ms(insert.ValueAtQuantile(99)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " commit → visible p50", Value: ms(commit.ValueAtQuantile(50)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " commit → visible p99", Value: ms(commit.ValueAtQuantile(99)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " achieved", Value: st.Rate(), Unit: "rows/s", Better: "higher"}).
		Add(result.Figure{Group: group, Name: name + " behind schedule max", Value: float64(st.MaxBehind.Microseconds()) / 1000, Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " not sent", Value: float64(st.Skipped), Unit: "count", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " not visible", Value: float64(invisible), Unit: "count", Better: "lower"})
	series := result.CDF(fmt.Sprintf("%s %d/s", group, rate), fromDue)
	if len(b.res.Charts) == 0 {
		b.res.Chart(result.Chart{File: chartCDF, Kind: "cdf", LogX: true})
	}
	b.res.Charts[0].Series = append(b.res.Charts[0].Series, series)
	if st.Rate() < 0.95*float64(rate) {
		b.res.Note("The generator did not hold %d jobs/s for River: it achieved %.0f jobs/s and fell up to %v behind its schedule "+
			"(%d inserts started over 1 ms late; %d due too late to start before the phase ended were not sent); "+
			"latency still counts from each job's due time.",
			rate, st.Rate(), st.MaxBehind.Round(1e6), st.Behind, st.Skipped)
	}
	if invisible > 0 {
		b.res.Note("River at %d jobs/s: %d of %d jobs had not started %v after the last insert; they count with the latency they had then (a lower bound).",
			rate, invisible, fromDue.TotalCount(), b.cfg.Tail)
	}
	fmt.Printf("River at %d jobs/s (achieved %.0f, up to %v behind): due → work p50 %.2f ms, p90 %.2f, p99 %.2f, max %.2f; "+
		"due → commit p50 %.2f ms, p99 %.2f; commit → work p50 %.2f ms, p99 %.2f; %d not started\n",
		rate, st.Rate(), st.MaxBehind.Round(1e5), ms(fromDue.ValueAtQuantile(50)), ms(fromDue.ValueAtQuantile(90)),
		ms(fromDue.ValueAtQuantile(99)), ms(fromDue.Max()), ms(insert.ValueAtQuantile(50)), ms(insert.ValueAtQuantile(99)),
		ms(commit.ValueAtQuantile(50)), ms(commit.ValueAtQuantile(99)), invisible)
}
