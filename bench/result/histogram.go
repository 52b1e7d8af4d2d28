package result

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// NewLatency is an HDR histogram of latencies in microseconds, 1 µs to 10 min, 3 digits.
func NewLatency() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
}

// Latencies records p50, p90, p99 and max of h (microseconds) in milliseconds, as figures
// named "<name> p50" …, in group.
func (r *Result) Latencies(group, name string, h *hdrhistogram.Histogram, target99 string) {
	ms := func(v int64) float64 { return float64(v) / 1000 }
	r.Add(Figure{Group: group, Name: name + " p50", Value: ms(h.ValueAtQuantile(50)), Unit: "ms", Better: "lower"})
	r.Add(Figure{Group: group, Name: name + " p90", Value: ms(h.ValueAtQuantile(90)), Unit: "ms", Better: "lower"})
	r.Add(Figure{Group: group, Name: name + " p99", Value: ms(h.ValueAtQuantile(99)), Unit: "ms", Better: "lower", Target: target99})
	r.Add(Figure{Group: group, Name: name + " max", Value: ms(h.Max()), Unit: "ms", Better: "lower"})
	r.Add(Figure{Group: group, Name: name + " count", Value: float64(h.TotalCount()), Unit: "count"})
}

// CDF is h's latency distribution as a chart series: x in milliseconds, y the fraction of
// values at or below x.
func CDF(name string, h *hdrhistogram.Histogram) Series {
	s := Series{Name: name}
	total := float64(h.TotalCount())
	if total == 0 {
		return s
	}
	for _, b := range h.CumulativeDistribution() {
		s.X = append(s.X, float64(b.ValueAt)/1000)
		s.Y = append(s.Y, float64(b.Count)/total)
		if b.Count == h.TotalCount() {
			break
		}
	}
	return s
}
