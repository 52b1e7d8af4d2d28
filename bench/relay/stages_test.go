package relay

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/cdc"
)

// stages records, for herald's relay, each streamed record's way out (cdc.Published), so
// that a phase's commit → Kafka ack can be split: commit → sent by the walsender (PostgreSQL's
// WAL flush, the walsender's wake-up, reading and decoding), sent → received by the relay (the
// socket, and the relay's receiving goroutine getting a core), received → produced (the
// relay's decoding and its bounds), produced → acked (the Kafka client and broker). Times
// count from the commit as PostgreSQL stamped it in the WAL.
type stages struct {
	mu sync.Mutex
	at map[string]cdc.Published
}

func newStages() *stages { return &stages{at: map[string]cdc.Published{}} }

func (s *stages) observe(p cdc.Published) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[p.DeliveryID]; !ok {
		s.at[p.DeliveryID] = p
	}
}

// stageNames are the parts of commit → acked, in order, then the whole.
var stageNames = []string{"commit → sent", "sent → received", "received → produced", "produced → acked", "commit → acked"}

func parts(p cdc.Published) [stageCount]time.Duration {
	return [stageCount]time.Duration{p.Sent.Sub(p.Committed), p.Received.Sub(p.Sent), p.Produced.Sub(p.Received),
		p.Acked.Sub(p.Produced), p.Acked.Sub(p.Committed)}
}

const stageCount = 5

// breakdown is one phase's stages: each part's distribution, and the mean of each part over
// the rows whose commit → acked is at or above its p99 (where the tail's time goes).
type breakdown struct {
	hist   [stageCount]*hdrhistogram.Histogram
	tail   [stageCount]time.Duration
	tailN  int
	missed int // rows of the phase the relay did not stream (or not yet)
}

func (s *stages) breakdown(rows []row) breakdown {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b breakdown
	for i := range b.hist {
		b.hist[i] = result.NewLatency()
	}
	var all [][stageCount]time.Duration
	for _, r := range rows {
		p, ok := s.at[r.id]
		if !ok {
			b.missed++
			continue
		}
		ps := parts(p)
		for i, d := range ps {
			_ = b.hist[i].RecordValue(max(1, d.Microseconds()))
		}
		all = append(all, ps)
	}
	if len(all) == 0 {
		return b
	}
	sort.Slice(all, func(i, j int) bool { return all[i][stageCount-1] < all[j][stageCount-1] })
	from := min(len(all)-1, len(all)*99/100)
	for _, ps := range all[from:] {
		for i, d := range ps {
			b.tail[i] += d
		}
	}
	b.tailN = len(all) - from
	for i := range b.tail {
		b.tail[i] /= time.Duration(b.tailN)
	}
	return b
}

// add records the breakdown's figures under group and the rate's name.
func (b breakdown) add(res *result.Result, group, name string) {
	ms := func(v int64) float64 { return float64(v) / 1000 }
	for i, st := range stageNames {
		res.Add(result.Figure{Group: group, Name: fmt.Sprintf("%s %s p50", name, st), Value: ms(b.hist[i].ValueAtQuantile(50)), Unit: "ms", Better: "lower"})
		res.Add(result.Figure{Group: group, Name: fmt.Sprintf("%s %s p99", name, st), Value: ms(b.hist[i].ValueAtQuantile(99)), Unit: "ms", Better: "lower"})
		res.Add(result.Figure{Group: group, Name: fmt.Sprintf("%s %s, mean over the slowest 1 %%", name, st), Value: float64(b.tail[i].Microseconds()) / 1000, Unit: "ms", Better: "lower"})
	}
}

func (b breakdown) String() string {
	out := ""
	for i, st := range stageNames {
		out += fmt.Sprintf("%s p50 %.2f / p99 %.2f ms (slowest 1 %%: %.2f ms); ", st,
			float64(b.hist[i].ValueAtQuantile(50))/1000, float64(b.hist[i].ValueAtQuantile(99))/1000, float64(b.tail[i].Microseconds())/1000)
	}
	return out + fmt.Sprintf("%d rows not streamed", b.missed)
}
