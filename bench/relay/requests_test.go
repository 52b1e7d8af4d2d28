package relay

import (
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/heraldhq/herald/bench/result"
)

// requests is a kgo hook on a relay's producer: the produce requests it sent during a phase,
// how many partitions' batches and records each carried, and how long the broker took to
// answer each one (from the request written to its response read). It tells a slow broker
// (answer time) from a client that sends too many small requests (requests/s, records per
// request).
type requests struct {
	mu      sync.Mutex
	n       int
	batches int
	records int
	wait    *hdrhistogram.Histogram // queued behind the connection's other requests
	answer  *hdrhistogram.Histogram // request written → response read
}

func newRequests() *requests {
	r := &requests{}
	r.reset()
	return r
}

// reset starts a phase.
func (r *requests) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n, r.batches, r.records = 0, 0, 0
	r.wait, r.answer = result.NewLatency(), result.NewLatency()
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (r *requests) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != (&kmsg.ProduceRequest{}).Key() || e.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	_ = r.wait.RecordValue(max(1, e.WriteWait.Microseconds()))
	_ = r.answer.RecordValue(max(1, (e.ReadWait + e.TimeToRead).Microseconds()))
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten.
func (r *requests) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches++
	r.records += m.NumRecords
}

// requestStats is one phase's produce requests.
type requestStats struct {
	perSecond, batchesPer, recordsPer float64
	wait, answer                      *hdrhistogram.Histogram
}

// stats is the phase's requests since reset; their rate is over busy, the time the phase's
// rows were written and awaited (an interleaved phase's own slices).
func (r *requests) stats(busy time.Duration) requestStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := float64(max(1, r.n))
	return requestStats{perSecond: float64(r.n) / busy.Seconds(),
		batchesPer: float64(r.batches) / n, recordsPer: float64(r.records) / n, wait: r.wait, answer: r.answer}
}

func (s requestStats) add(res *result.Result, group, name string) {
	ms := func(v int64) float64 { return float64(v) / 1000 }
	res.Add(result.Figure{Group: group, Name: name + " produce requests", Value: s.perSecond, Unit: "/s"}).
		Add(result.Figure{Group: group, Name: name + " partitions per produce request", Value: s.batchesPer, Unit: "count"}).
		Add(result.Figure{Group: group, Name: name + " records per produce request", Value: s.recordsPer, Unit: "count"}).
		Add(result.Figure{Group: group, Name: name + " produce request answered p50", Value: ms(s.answer.ValueAtQuantile(50)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " produce request answered p99", Value: ms(s.answer.ValueAtQuantile(99)), Unit: "ms", Better: "lower"}).
		Add(result.Figure{Group: group, Name: name + " produce request queued p99", Value: ms(s.wait.ValueAtQuantile(99)), Unit: "ms", Better: "lower"})
}

func (s requestStats) String() string {
	return fmt.Sprintf("%.0f produce requests/s, %.1f partitions and %.1f records each; answered p50 %.2f / p99 %.2f ms; queued p99 %.2f ms",
		s.perSecond, s.batchesPer, s.recordsPer, float64(s.answer.ValueAtQuantile(50))/1000, float64(s.answer.ValueAtQuantile(99))/1000,
		float64(s.wait.ValueAtQuantile(99))/1000)
}
