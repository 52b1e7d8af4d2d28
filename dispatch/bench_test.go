package dispatch

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// BenchmarkHighLatencyUnderLowBacklog measures, for HIGH deliveries produced one at a time,
// the time from producing the record (the relay's publish) to the sender being called, while
// a LOW backlog drains against the same provider's 500/s limit (LOW's share: 300/s). Run:
//
//	go test ./dispatch/ -run '^$' -bench HighLatencyUnderLowBacklog -benchtime 300x
func BenchmarkHighLatencyUnderLowBacklog(b *testing.B) {
	e := newEnv(b)
	cfg := e.config()
	cfg.RateLimits = map[string]int{"sms:bench": 500}
	// Enough LOW workers that the limit, not the lane, sets the drain rate.
	lowLane := cfg.Lanes[herald.PriorityLow]
	lowLane.Concurrency = 8
	cfg.Lanes[herald.PriorityLow] = lowLane
	var waiters sync.Map // delivery id → chan struct{}
	s := &MemorySender{ProviderName: "sms:bench", OnCall: func(m *senders.Message) {
		if ch, ok := waiters.LoadAndDelete(m.DeliveryID); ok {
			close(ch.(chan struct{}))
		}
	}}
	e.start(cfg, nil, smsOnly(s))
	ctx := context.Background()

	waitCall := func(id string, produce func()) time.Duration {
		ch := make(chan struct{})
		waiters.Store(id, ch)
		start := time.Now()
		produce()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			b.Fatalf("HIGH delivery %s never reached the sender", id)
		}
		return time.Since(start)
	}
	warm := e.insert(fixture{})
	waitCall(warm, func() { e.publish(warm) }) // first use of the limiter waits out one window

	backlog := max(3000, 5*b.N)
	low := e.insertN(backlog, fixture{Priority: herald.PriorityLow})
	e.publish(low...)
	high := e.insertN(b.N, fixture{Priority: herald.PriorityHigh})
	recs := e.records(high...)
	lowBefore := len(s.Calls())

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	begin := time.Now()
	for i := 0; i < b.N; i++ {
		lat = append(lat, waitCall(high[i], func() {
			require.NoError(b, e.producer.ProduceSync(ctx, recs[i]).FirstErr())
		}))
	}
	elapsed := time.Since(begin)
	b.StopTimer()

	lowDuring := len(s.Calls()) - lowBefore - b.N
	require.Less(b, lowDuring, backlog, "the LOW backlog ran dry during the measurement")
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50_ms")
	b.ReportMetric(q(0.99), "p99_ms")
	b.ReportMetric(float64(lowDuring)/elapsed.Seconds(), "low_calls/s")
}
