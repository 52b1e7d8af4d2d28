package route

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// BenchmarkOutageFailover measures a total outage of the primary SMS account on the real
// stack (relay, PostgreSQL, Kafka, Redis; in-memory providers): HIGH OTPs arrive at 20/s while
// a LOW backlog drains at the standby's limit, the primary answers 503 to everything for
// benchOutage, then recovers. It reports the time from the outage's start to the first HIGH
// call on the standby, the HIGH insert → successful provider call p50/p99 during the outage,
// the standby's busiest second of LOW calls against LOW's share of its limit, and the time
// from the recovery until the primary is back at its weight.
//
//	go test -run '^$' -bench OutageFailover -benchtime 1x ./dispatch/route/
func BenchmarkOutageFailover(b *testing.B) {
	for range b.N {
		runOutageBench(b)
	}
}

const (
	benchOutage       = 10 * time.Second
	benchStandbyLimit = 50 // standby calls per second; LOW may use 60 % of it
)

func runOutageBench(b *testing.B) {
	s := newStackTB(b)
	out := &outage{}
	var mu sync.Mutex
	var outageAt time.Time
	primary := &dispatch.MemorySender{ProviderName: "sms:twilio", Behave: out.behave, Latency: 5 * time.Millisecond}
	standby := &dispatch.MemorySender{ProviderName: "sms:vonage", Latency: 5 * time.Millisecond}
	r := s.route(Config{}, primary, standby) // the defaults: 10 s window, 5 failures, 1 s steps, 5 s probes
	s.dispatch(s.dispatchConfig(map[string]int{"sms:twilio": 200, "sms:vonage": benchStandbyLimit}), r)
	keys := r.Sender(herald.ChannelSMS).keys

	s.insert(3000, herald.PriorityLow)
	sent := map[string]time.Time{} // HIGH delivery → insert time
	var highIDs []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // HIGH at 20/s
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				at := time.Now()
				ids := s.insert(1, herald.PriorityHigh)
				mu.Lock()
				sent[ids[0]] = at
				highIDs = append(highIDs, ids...)
				mu.Unlock()
			}
		}
	}()
	time.Sleep(3 * time.Second) // a healthy phase: the benchmark's own timeline, not a wait for a condition
	mu.Lock()
	outageAt = time.Now()
	mu.Unlock()
	out.down.Store(true)
	time.Sleep(benchOutage)
	recoveredAt := time.Now()
	out.down.Store(false)
	var backAt time.Time
	heraldtest.WaitForEvery(s.t, 2*time.Minute, 2*time.Millisecond, "the primary back at its weight", func() bool {
		lv, err := r.st.levels(context.Background(), keys)
		if err == nil && lv[0] == 0 {
			backAt = time.Now()
			return true
		}
		return false
	})
	close(stop)
	<-done
	mu.Lock()
	ids := append([]string(nil), highIDs...)
	mu.Unlock()
	s.waitSent(2*time.Minute, ids)

	isHigh := map[string]bool{}
	for _, id := range ids {
		isHigh[id] = true
	}
	firstStandby := time.Duration(-1)
	hist := hdrhistogram.New(1, 60_000_000, 3) // µs
	var lowOnStandby []time.Time
	for _, c := range standby.Calls() {
		id := c.Message.DeliveryID
		if !isHigh[id] {
			if c.At.After(outageAt) && c.At.Before(recoveredAt) {
				lowOnStandby = append(lowOnStandby, c.At)
			}
			continue
		}
		if c.At.After(outageAt) && (firstStandby < 0 || c.At.Sub(outageAt) < firstStandby) {
			firstStandby = c.At.Sub(outageAt)
		}
		if at := sent[id]; at.After(outageAt) && at.Before(recoveredAt) {
			_ = hist.RecordValue(c.At.Sub(at).Microseconds())
		}
	}
	slices.SortFunc(lowOnStandby, func(a, b time.Time) int { return a.Compare(b) })
	busiest := 0
	for i := range lowOnStandby {
		j := i
		for j < len(lowOnStandby) && lowOnStandby[j].Sub(lowOnStandby[i]) < time.Second {
			j++
		}
		busiest = max(busiest, j-i)
	}
	b.ReportMetric(firstStandby.Seconds()*1000, "ms-to-standby")
	b.ReportMetric(float64(hist.ValueAtQuantile(50))/1000, "high-p50-ms")
	b.ReportMetric(float64(hist.ValueAtQuantile(99))/1000, "high-p99-ms")
	b.ReportMetric(float64(busiest), "standby-low-max/s")
	b.ReportMetric(backAt.Sub(recoveredAt).Seconds(), "s-to-recover")
	fmt.Printf("outage: first HIGH on the standby after %v; HIGH insert → call during the outage p50 %.1f ms p99 %.1f ms max %.1f ms (%d deliveries); "+
		"LOW on the standby: busiest second %d calls (LOW share %d of %d/s); primary back at its weight %v after recovery\n",
		firstStandby, float64(hist.ValueAtQuantile(50))/1000, float64(hist.ValueAtQuantile(99))/1000, float64(hist.Max())/1000,
		hist.TotalCount(), busiest, benchStandbyLimit*6/10, benchStandbyLimit, backAt.Sub(recoveredAt))
}
