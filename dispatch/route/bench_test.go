package route

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// BenchmarkScenarioFailover is the bench suite's failover scenario: a total outage of the
// primary SMS account on the real stack (relay, PostgreSQL, Kafka, Redis; in-memory
// providers). HIGH OTPs arrive at 20/s while a LOW backlog drains, the primary answers 503 to
// everything for the outage, then recovers. It reports the time from the outage's start to
// the first HIGH call on the standby, the HIGH insert → successful provider call latency
// before, during and after the outage, the standby's busiest second of LOW calls (and of all
// its calls) against LOW's share of its limit (and the limit), and the time from the recovery
// until the primary is back at its weight. Routing runs on its defaults.
//
//	go test -run '^$' -bench ScenarioFailover -benchtime 1x ./dispatch/route/
func BenchmarkScenarioFailover(b *testing.B) {
	for range b.N {
		runOutageBench(b)
	}
}

const (
	benchHighRate     = 20  // HIGH deliveries per second
	benchPrimaryLimit = 200 // primary calls per second
	benchStandbyLimit = 50  // standby calls per second; LOW may use 60 % of it
)

// outageRun is what one run of the scenario saw: its phases and the HIGH deliveries it
// inserted, with their insert times.
type outageRun struct {
	start, outageAt, recoveredAt, backAt time.Time
	sent                                 map[string]time.Time // HIGH delivery → insert time
}

func runOutageBench(b *testing.B) {
	healthy := result.ScaledDuration(3*time.Second, 2*time.Second)
	outageFor := result.ScaledDuration(10*time.Second, 5*time.Second)
	backlog := result.Scaled(3000, 600)
	r := result.New("failover", "the primary SMS account answers 503 to everything: HIGH onto the standby, the standby's limit, the way back")
	r.Load = fmt.Sprintf("two in-memory SMS accounts (5 ms a call): the primary sms:twilio (weight 100, limit %d/s) and the "+
		"standby sms:vonage (weight 0, limit %d/s); a LOW backlog of %d deliveries drains while HIGH deliveries are "+
		"inserted at %d/s (one per transaction, published by the relay); %s healthy, then the primary answers 503 to "+
		"every call for %s, then recovers; routing on its defaults (10 s window, 5 failures, 4 steps of 1 s, a probe every 5 s)",
		benchPrimaryLimit, benchStandbyLimit, backlog, benchHighRate, healthy, outageFor)
	loadBefore := result.LoadAverage()
	s := newStackTB(b)
	out := &outage{}
	primary := &dispatch.MemorySender{ProviderName: "sms:twilio", Behave: out.behave, Latency: 5 * time.Millisecond}
	standby := &dispatch.MemorySender{ProviderName: "sms:vonage", Latency: 5 * time.Millisecond}
	rt := s.route(Config{}, primary, standby)
	s.dispatch(s.dispatchConfig(map[string]int{"sms:twilio": benchPrimaryLimit, "sms:vonage": benchStandbyLimit}), rt)
	s.insert(backlog, herald.PriorityLow)

	b.ResetTimer()
	run := outageTimeline(s, rt, out, healthy, outageFor)
	b.StopTimer()
	reportOutage(b, r, run, primary, standby)
	r.Note("Load average before %s, after %s (2 cores, shared with PostgreSQL, Kafka and Redis).", loadBefore, result.LoadAverage())
	heraldtest.Must(b, r.Write())
}

// outageTimeline runs the scenario's timeline: HIGH at benchHighRate from the start, healthy,
// the outage for outageFor, the recovery until the primary is back at its weight; then it
// waits until every HIGH delivery is SENT.
func outageTimeline(s *stack, rt *Router, out *outage, healthy, outageFor time.Duration) outageRun {
	run := outageRun{start: time.Now(), sent: map[string]time.Time{}}
	keys := rt.Sender(herald.ChannelSMS).keys
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // HIGH at benchHighRate
		defer close(done)
		tick := time.NewTicker(time.Second / benchHighRate)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				at := time.Now()
				ids := s.insert(1, herald.PriorityHigh)
				mu.Lock()
				run.sent[ids[0]] = at
				mu.Unlock()
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	phase := "healthy"
	progress := result.Progress(ctx, os.Stderr, "failover", 5*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%s; %d HIGH inserted", phase, len(run.sent))
	})
	time.Sleep(healthy) // the scenario's own timeline, not a wait for a condition
	mu.Lock()
	run.outageAt, phase = time.Now(), "primary down"
	mu.Unlock()
	out.down.Store(true)
	time.Sleep(outageFor)
	mu.Lock()
	run.recoveredAt, phase = time.Now(), "primary recovered, stepping back"
	mu.Unlock()
	out.down.Store(false)
	heraldtest.WaitForEvery(s.t, 2*time.Minute, 2*time.Millisecond, "the primary back at its weight", func() bool {
		lv, err := rt.st.levels(context.Background(), keys)
		if err == nil && lv[0] == 0 {
			run.backAt = time.Now()
			return true
		}
		return false
	})
	close(stop)
	<-done
	progress()
	ids := make([]string, 0, len(run.sent))
	for id := range run.sent {
		ids = append(ids, id)
	}
	s.waitSent(2*time.Minute, ids)
	return run
}

// outageTally is what the providers' calls say about a run.
type outageTally struct {
	toStandby  time.Duration                      // outage start → first HIGH call on the standby; -1: none
	high       map[string]*hdrhistogram.Histogram // phase → HIGH insert → successful call (µs)
	busiestLow int                                // the standby's busiest second of LOW calls during the outage
	busiestAll int                                // and of all its calls
	perSecond  map[string]*result.PerSecond       // chart series → calls per second
}

var (
	outagePhases = []string{"healthy", "outage", "recovery"}
	callSeries   = []string{"primary, every call", "standby, HIGH", "standby, LOW"}
)

func tallyOutage(run outageRun, primary, standby *dispatch.MemorySender) outageTally {
	during := func(t time.Time) bool { return t.After(run.outageAt) && t.Before(run.recoveredAt) }
	t := outageTally{toStandby: -1, high: map[string]*hdrhistogram.Histogram{}, perSecond: map[string]*result.PerSecond{}}
	for _, ph := range outagePhases {
		t.high[ph] = result.NewLatency()
	}
	for _, n := range callSeries {
		t.perSecond[n] = &result.PerSecond{T0: run.start}
	}
	last := map[string]time.Time{} // HIGH delivery → its last call, the one that succeeded
	for _, c := range primary.Calls() {
		t.perSecond["primary, every call"].Add(c.At, 1)
		if _, ok := run.sent[c.Message.DeliveryID]; ok && c.At.After(last[c.Message.DeliveryID]) {
			last[c.Message.DeliveryID] = c.At
		}
	}
	var lowOnStandby, allOnStandby []time.Time
	for _, c := range standby.Calls() {
		_, isHigh := run.sent[c.Message.DeliveryID]
		if during(c.At) {
			allOnStandby = append(allOnStandby, c.At)
		}
		if !isHigh {
			t.perSecond["standby, LOW"].Add(c.At, 1)
			if during(c.At) {
				lowOnStandby = append(lowOnStandby, c.At)
			}
			continue
		}
		if c.At.After(run.outageAt) && (t.toStandby < 0 || c.At.Sub(run.outageAt) < t.toStandby) {
			t.toStandby = c.At.Sub(run.outageAt)
		}
		t.perSecond["standby, HIGH"].Add(c.At, 1)
		if c.At.After(last[c.Message.DeliveryID]) {
			last[c.Message.DeliveryID] = c.At
		}
	}
	for id, at := range run.sent {
		ph := "recovery"
		switch {
		case at.Before(run.outageAt):
			ph = "healthy"
		case during(at):
			ph = "outage"
		}
		_ = t.high[ph].RecordValue(last[id].Sub(at).Microseconds())
	}
	t.busiestLow, t.busiestAll = busiestSecond(lowOnStandby), busiestSecond(allOnStandby)
	return t
}

// reportOutage turns the providers' calls into the scenario's figures and chart.
func reportOutage(b *testing.B, r *result.Result, run outageRun, primary, standby *dispatch.MemorySender) {
	t := tallyOutage(run, primary, standby)
	toStandby, toRecover, out := t.toStandby.Seconds()*1000, run.backAt.Sub(run.recoveredAt).Seconds(), t.high["outage"]
	r.Add(result.Figure{Name: "outage start → first HIGH call on the standby", Value: toStandby, Unit: "ms", Better: "lower", Target: "≤ 2000"})
	for _, ph := range outagePhases {
		target := map[bool]string{true: "≤ 500"}[ph == "outage"]
		r.Latencies(ph, "HIGH insert → provider call", t.high[ph], target)
	}
	r.Add(result.Figure{Name: "standby's busiest second of LOW calls, during the outage", Value: float64(t.busiestLow), Unit: "calls",
		Better: "lower", Target: fmt.Sprintf("≤ %d (LOW's share of the standby's limit)", benchStandbyLimit*6/10)})
	r.Add(result.Figure{Name: "standby's busiest second of all calls, during the outage", Value: float64(t.busiestAll), Unit: "calls",
		Better: "lower", Target: fmt.Sprintf("≤ %d (its limit)", benchStandbyLimit)})
	r.Add(result.Figure{Name: "recovery → primary back at its weight", Value: toRecover, Unit: "s", Better: "lower"})
	ch := result.Chart{File: "calls-per-second", Kind: "line", XLabel: "seconds into the run", YLabel: "calls per second",
		Title: fmt.Sprintf("provider calls per second; primary down from %.0f s to %.0f s", run.outageAt.Sub(run.start).Seconds(),
			run.recoveredAt.Sub(run.start).Seconds())}
	for _, n := range callSeries {
		ch.Series = append(ch.Series, t.perSecond[n].Series(n, int(run.backAt.Sub(run.start)/time.Second)+2))
	}
	r.Chart(ch)
	r.Note("HIGH latency runs from just before a delivery's insert (its own transaction; the relay publishes it from the WAL, " +
		"as no accepting process publishes it here) to the start of its successful provider call; a phase holds the " +
		"deliveries inserted in it (healthy: before the outage; recovery: from the recovery until the primary is back at its weight).")
	b.ReportMetric(toStandby, "ms-to-standby")
	b.ReportMetric(ms(out, 50), "high-p50-ms")
	b.ReportMetric(ms(out, 99), "high-p99-ms")
	b.ReportMetric(float64(t.busiestLow), "standby-low-max/s")
	b.ReportMetric(toRecover, "s-to-recover")
	b.Logf("outage: first HIGH on the standby after %v; HIGH insert → call during the outage p50 %.1f ms p99 %.1f ms max %.1f ms (%d deliveries); "+
		"LOW on the standby: busiest second %d calls (LOW share %d of %d/s), all calls %d; primary back at its weight %v after recovery",
		t.toStandby, ms(out, 50), ms(out, 99), float64(out.Max())/1000, out.TotalCount(), t.busiestLow, benchStandbyLimit*6/10,
		benchStandbyLimit, t.busiestAll, run.backAt.Sub(run.recoveredAt))
}

// busiestSecond is the most of times that fall in any window of one second.
func busiestSecond(times []time.Time) int {
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	most, lo := 0, 0
	for hi := range times {
		for times[hi].Sub(times[lo]) >= time.Second {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

func ms(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
