package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders"
)

// BenchmarkScenarioSeedLoad is the suite's seed-load scenario: the seed article's traffic
// scaled to this machine. Single POSTs arrive open loop at a steady 600/s, one in twenty a
// HIGH OTP; halfway a LOW campaign by segment starts through the campaign API; at three
// quarters single POSTs burst to 20,000/s. Per second: offered, accepted, refused, sent,
// backlog and HIGH p99; then the time the backlog takes to drain.
//
//	go test -run '^$' -bench ScenarioSeedLoad -benchtime 1x -timeout 30m ./bench/e2e
func BenchmarkScenarioSeedLoad(b *testing.B) {
	const (
		steadyRate = 600.0
		burstRate  = 20_000.0
		highEvery  = 20 // every 20th steady POST is a HIGH OTP: 5 %
	)
	steady := result.ScaledDuration(60*time.Second, 4*time.Second)
	burst := result.ScaledDuration(5*time.Second, 100*time.Millisecond)
	users := result.Scaled(200_000, 2000)
	drainCap := result.ScaledDuration(90*time.Second, 15*time.Second)
	r := result.New("seed-load", "the seed's traffic profile scaled to this machine: steady POSTs, a campaign, a burst")
	r.Load = fmt.Sprintf("single SMS POSTs open loop at %.0f/s for %s (5 %% HIGH OTPs, the rest NORMAL); a LOW campaign by "+
		"segment of %d users through POST /api/campaigns at %s; single NORMAL POSTs bursting to %.0f/s open loop for %s at %s; "+
		"no provider rate limit, a provider that answers at once",
		steadyRate, steady, users, steady/2, burstRate, burst, steady*3/4)
	st := newStageTracer() // the HIGH OTPs' spans, for their stage breakdown
	r.Load += fmt.Sprintf("; HIGH published by the accepting process right after the commit: %t", publishHigh())
	at := newAnswerTimes() // each POST's time in herald's handler, to split its answer time
	s := startStack(b, options{poolConns: 48, expander: true, tracer: st.tp, highProcess: highProcess(), handler: at.wrap,
		concurrency: map[herald.Priority]int{herald.PriorityHigh: 12, herald.PriorityNormal: 16, herald.PriorityLow: 8}})
	st.also = s.childSpans
	r.Load += highProcessNote(s)
	if loadProcess() {
		r.Load += "; the load generator in a process of its own, in the benchmark's session (BENCH_LOAD_PROCESS)"
	} else {
		r.Load += "; the load generator in the benchmark's process (BENCH_LOAD_PROCESS=false)"
	}
	s.addUsers(b, users)
	s.settle(b)
	loadBefore := result.LoadAverage()

	var mu sync.Mutex
	highDue := map[string]time.Time{}
	highCalled := map[string]time.Time{}
	s.onCall(func(m *senders.Message, now time.Time) {
		if m.Priority == herald.PriorityHigh {
			mu.Lock()
			if _, ok := highCalled[m.DeliveryID]; !ok {
				highCalled[m.DeliveryID] = now
			}
			mu.Unlock()
		}
	})

	b.ResetTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lead := 100 * time.Millisecond
	if loadProcess() {
		lead = 2 * time.Second // the generator process starts meanwhile
	}
	start := time.Now().Add(lead)
	campaignAt, burstAt := start.Add(steady/2), start.Add(steady*3/4)
	loadEnd := start.Add(steady)
	offered, accepted := &result.PerSecond{T0: start}, &result.PerSecond{T0: start}
	refusedPer := map[string]*result.PerSecond{}
	refusedBy := map[string]int{}
	steadyLatency, burstLatency := result.NewLatency(), result.NewLatency()
	// Sent → answered, NORMAL only: herald's own answer time, without the generator's queue;
	// the admission wait bounds it (a 503 overloaded comes after at most --admission-wait).
	steadyAnswer, burstAnswer := result.NewLatency(), result.NewLatency()
	// HIGH's sent → answered: admitted ahead of NORMAL, it waits only for other HIGH.
	highAnswer := result.NewLatency()
	// Each answer split into herald's handler and the rest (answerTimes).
	steadySplit, burstSplit, highSplit := newAnswerSplit(), newAnswerSplit(), newAnswerSplit()
	var noHandler int // answers (timeouts, errors) whose request never reached the handler
	var nAccepted, nRefused, burstAccepted atomic.Int64
	var steadyUnsent, burstUnsent atomic.Int64
	// post is one POST of the open loop: its answer counted in the second it came.
	account := func(idem string, prio herald.Priority, due, sentAt, now time.Time, id, why string, h, answer *hdrhistogram.Histogram,
		split answerSplit, traced loadLine) bool {
		mu.Lock()
		defer mu.Unlock()
		offered.Add(due, 1)
		if prio != herald.PriorityHigh {
			record(answer, now.Sub(sentAt))
		} else {
			record(highAnswer, now.Sub(sentAt))
		}
		if inside, ok := at.take(idem); ok {
			split.add(now.Sub(sentAt), inside)
			split.addTrace(traced, inside)
		} else if prio != herald.PriorityHigh || s.highURL == "" { // HIGH's API in the HIGH process: not timed here
			noHandler++
		}
		if why != "" {
			nRefused.Add(1)
			refusedBy[why]++
			if refusedPer[why] == nil {
				refusedPer[why] = &result.PerSecond{T0: start}
			}
			refusedPer[why].Add(now, 1)
			return false
		}
		nAccepted.Add(1)
		accepted.Add(now, 1)
		record(h, now.Sub(due))
		if prio == herald.PriorityHigh {
			highDue[id] = due
		}
		return true
	}
	// post sends one POST from this process (BENCH_LOAD_PROCESS=false) and accounts for it.
	post := func(client *http.Client, idem string, prio herald.Priority, due time.Time, h, answer *hdrhistogram.Histogram, split answerSplit) bool {
		var header map[string]string
		if prio == herald.PriorityHigh {
			header = map[string]string{"traceparent": st.traceparent()}
		}
		sentAt := time.Now()
		id, why := s.postWith(ctx, client, idem, prio, header)
		return account(idem, prio, due, sentAt, time.Now(), id, why, h, answer, split, loadLine{})
	}

	// The backlog, sampled every second: deliveries waiting for the relay or a worker.
	backlog := &result.PerSecond{T0: start}
	// The API's pool (dispatch has its own, as in herald serve), sampled with the
	// backlog: the mean wait of an acquire that found no idle connection, per second.
	poolWait := &result.PerSecond{T0: start}
	lastStat := s.pool.Stat()
	var lastBacklog atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			var n int64
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM delivery WHERE status IN ('PENDING', 'QUEUED')`).Scan(&n); err != nil {
				if ctx.Err() == nil {
					b.Errorf("backlog: %v", err)
				}
				return
			}
			lastBacklog.Store(n)
			mu.Lock()
			backlog.Set(time.Now(), float64(n))
			st := s.pool.Stat()
			if waits := st.EmptyAcquireCount() - lastStat.EmptyAcquireCount(); waits > 0 {
				wait := st.EmptyAcquireWaitTime() - lastStat.EmptyAcquireWaitTime()
				poolWait.Set(time.Now(), float64(wait.Microseconds())/1000/float64(waits))
			}
			lastStat = st
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	progress := result.Progress(ctx, os.Stderr, r.Scenario, 5*time.Second, func() string {
		return fmt.Sprintf("accepted %d, refused %d, sent %d, backlog %d", nAccepted.Load(), nRefused.Load(),
			len(s.calls()), lastBacklog.Load())
	})

	sched := newSchedLatency() // herald's goroutines waiting for a core, before and during the burst
	schedStart := sched.snapshot()
	var schedBurst, schedEnd *metrics.Float64Histogram
	var loads sync.WaitGroup
	var campaign string
	var campaignErr error
	var burstOffered int
	loads.Add(3)
	go func() {
		defer loads.Done()
		time.Sleep(time.Until(campaignAt)) // the campaign's start is part of the profile
		campaign, campaignErr = s.startCampaign("seed-load", herald.PriorityLow)
	}()
	go func() {
		defer loads.Done()
		time.Sleep(time.Until(burstAt))
		schedBurst = sched.snapshot()
		time.Sleep(time.Until(burstAt.Add(burst)))
		schedEnd = sched.snapshot()
	}()
	go func() {
		defer loads.Done()
		if !loadProcess() { // the generator in this process
			var here sync.WaitGroup
			here.Add(1)
			go func() {
				defer here.Done()
				openLoopPool(ctx, start, steadyRate, steadyWorkers, until(loadEnd), func(i int, due time.Time) {
					prio, client, split := herald.PriorityNormal, loadClient, steadySplit
					if i%highEvery == 0 {
						prio, client, split = herald.PriorityHigh, otpClient, highSplit
					}
					post(client, fmt.Sprintf("s-%d", i), prio, due, steadyLatency, steadyAnswer, split)
				}, func(int, time.Time) { steadyUnsent.Add(1) })
			}()
			burstOffered = openLoopPool(ctx, burstAt, burstRate, burstWorkers, until(burstAt.Add(burst)), func(i int, due time.Time) {
				if post(burstClient, fmt.Sprintf("b-%d", i), herald.PriorityNormal, due, burstLatency, burstAnswer, burstSplit) {
					burstAccepted.Add(1)
				}
			}, func(int, time.Time) { burstUnsent.Add(1) })
			here.Wait()
			return
		}
		traces := make([]string, int(steadyRate*steady.Seconds())/highEvery+1)
		for i := range traces {
			traces[i] = st.traceparent()
		}
		offeredBy, clientSched := startLoadChild(b, loadChildConfig{URL: s.url, HighURL: s.highURL, Key: s.key, Loops: []loadLoop{
			{Name: "s", Start: start, End: loadEnd, Rate: steadyRate, Workers: steadyWorkers, HighEvery: highEvery, Traces: traces},
			{Name: "b", Start: burstAt, End: burstAt.Add(burst), Rate: burstRate, Workers: burstWorkers, Burst: true},
		}}, func(l loadLine) {
			steadyLoop := l.Loop == "s"
			switch {
			case l.Unsent && steadyLoop:
				steadyUnsent.Add(1)
			case l.Unsent:
				burstUnsent.Add(1)
			case steadyLoop:
				split := steadySplit
				if l.Priority == herald.PriorityHigh {
					split = highSplit
				}
				account(fmt.Sprintf("s-%d", l.I), l.Priority, l.Due, l.Sent, l.Answered, l.ID, l.Refused, steadyLatency, steadyAnswer, split, l)
			default:
				if account(fmt.Sprintf("b-%d", l.I), l.Priority, l.Due, l.Sent, l.Answered, l.ID, l.Refused, burstLatency, burstAnswer, burstSplit, l) {
					burstAccepted.Add(1)
				}
			}
		})
		burstOffered = offeredBy["b"]
		r.Add(result.Figure{Group: "steady", Name: "load generator's goroutine scheduling latency p99", Value: clientSched["s"], Unit: "ms", Better: "lower"})
		r.Add(result.Figure{Group: "burst", Name: "load generator's goroutine scheduling latency p99", Value: clientSched["b"], Unit: "ms", Better: "lower"})
	}()
	loads.Wait()
	heraldtest.Must(b, campaignErr)
	answered := time.Now()

	// The drain: until nothing waits and the campaign is expanded, or drainCap after the load.
	var drained time.Time
	for time.Since(answered) < drainCap {
		status, _, err := s.campaignState(ctx, campaign)
		heraldtest.Must(b, err)
		var n int64
		heraldtest.Must(b, s.pool.QueryRow(ctx, `SELECT count(*) FROM delivery WHERE status IN ('PENDING', 'QUEUED', 'SENDING')`).Scan(&n))
		if n == 0 && status != "EXPANDING" {
			drained = time.Now()
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	progress()
	cancel()
	<-sampled
	finished := time.Now()
	r.Note("Load average before %s, after %s (2 cores, shared with PostgreSQL, Kafka, Redis and the load generator).",
		loadBefore, result.LoadAverage())

	// Per second, over the whole run.
	secs := int(finished.Sub(start)/time.Second) + 1
	calls := s.calls()
	sent := &result.PerSecond{T0: start}
	for _, c := range calls {
		sent.Add(c.At, 1)
	}
	high, highBurst := result.NewLatency(), result.NewLatency()
	highPerSecond := &quantilePerSecond{t0: start}
	var highUnsent int
	mu.Lock()
	for id, due := range highDue {
		at, ok := highCalled[id]
		if !ok {
			highUnsent++
			continue
		}
		record(high, at.Sub(due))
		highPerSecond.record(due, at.Sub(due))
		if !due.Before(burstAt) && due.Before(burstAt.Add(burst)) {
			record(highBurst, at.Sub(due))
		}
	}
	kinds := make([]string, 0, len(refusedBy))
	for k := range refusedBy {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	rates := result.Chart{File: "rates-over-time", Title: "POSTs offered, accepted, refused and provider calls per second",
		Kind: "line", XLabel: "seconds since the load began", YLabel: "per second",
		Series: []result.Series{offered.Series("offered/s", secs), accepted.Series("accepted/s", secs), sent.Series("sent/s", secs)}}
	for _, k := range kinds {
		rates.Series = append(rates.Series, refusedPer[k].Series("refused/s ("+k+")", secs))
	}
	backlogSeries := backlog.Series("backlog (PENDING + QUEUED)", secs)
	poolSeries := poolWait.Series("mean wait for a pool connection (ms)", secs)
	maxPoolWait := poolWait.Peak()
	peakAccepted := accepted.Peak()
	mu.Unlock()
	r.Chart(rates)
	r.Chart(result.Chart{File: "pool-wait-over-time", Title: fmt.Sprintf("the API's PostgreSQL pool (%d connections): "+
		"mean wait of an acquire that found none idle, per second", s.pool.Config().MaxConns),
		Kind: "line", XLabel: "seconds since the load began", YLabel: "ms", Series: []result.Series{poolSeries}})
	r.Add(result.Figure{Name: "max mean pool acquire wait in a second", Value: maxPoolWait, Unit: "ms", Better: "lower"})
	r.Chart(result.Chart{File: "backlog-over-time", Title: "backlog: deliveries PENDING or QUEUED (sampled each second)",
		Kind: "line", XLabel: "seconds since the load began", YLabel: "deliveries", Series: []result.Series{backlogSeries}})
	r.Chart(result.Chart{File: "high-over-time", Title: "HIGH due → provider call per second (by due time)", Kind: "line",
		XLabel: "seconds since the load began", YLabel: "latency (ms)",
		Series: []result.Series{highPerSecond.series("HIGH p99", 99), highPerSecond.series("HIGH p50", 50)}})

	steadyAccepted := int(nAccepted.Load()) - int(burstAccepted.Load())
	sustained := float64(steadyAccepted) / steady.Seconds()
	r.Add(result.Figure{Group: "steady", Name: "accepted", Value: sustained, Unit: "POST/s", Better: "higher", Target: fmt.Sprintf("≥ %.0f", steadyRate)})
	answerTarget := fmt.Sprintf("≤ %d", (ingest.DefaultAdmissionWait + 100*time.Millisecond).Milliseconds())
	r.Latencies("steady", "POST due → answer", steadyLatency, "")
	r.Latencies("steady", "NORMAL POST sent → answer", steadyAnswer, answerTarget)
	r.Latencies("steady", "HIGH POST sent → answer", highAnswer, answerTarget)
	r.Add(result.Figure{Group: "steady", Name: "not sent by the generator", Value: float64(steadyUnsent.Load()), Unit: "POSTs", Better: "lower"})
	r.Add(result.Figure{Group: "burst", Name: "offered", Value: float64(burstOffered), Unit: "POSTs"})
	r.Add(result.Figure{Group: "burst", Name: "accepted", Value: float64(burstAccepted.Load()), Unit: "POSTs", Better: "higher"})
	r.Add(result.Figure{Group: "burst", Name: "peak accepted", Value: peakAccepted, Unit: "POST/s", Better: "higher"})
	r.Latencies("burst", "POST due → answer", burstLatency, "")
	r.Latencies("burst", "NORMAL POST sent → answer", burstAnswer, answerTarget)
	r.Add(result.Figure{Group: "burst", Name: "not sent by the generator", Value: float64(burstUnsent.Load()), Unit: "POSTs", Better: "lower"})
	for _, k := range kinds {
		r.Add(result.Figure{Group: "refused", Name: k, Value: float64(refusedBy[k]), Unit: "POSTs", Better: "lower"})
	}
	steadySplit.report(r, "steady", "NORMAL")
	burstSplit.report(r, "burst", "NORMAL")
	highSplit.report(r, "steady", "HIGH")
	steadySched, _ := quantileSince(schedStart, schedBurst, 0.99)
	burstSched, nSched := quantileSince(schedBurst, schedEnd, 0.99)
	r.Add(result.Figure{Group: "steady", Name: "goroutine scheduling latency p99", Value: steadySched, Unit: "ms", Better: "lower"})
	r.Add(result.Figure{Group: "burst", Name: "goroutine scheduling latency p99", Value: burstSched, Unit: "ms", Better: "lower"})
	r.Note("Answer times split: \"in herald's handler\" runs from the moment the HTTP server hands the request to the "+
		"API's handler to the handler's return (admission, the accept, the answer written); \"outside the handler\" is "+
		"the rest of sent → answer: the server reading the request, the goroutines of server and client waiting for a "+
		"core, the client's own work. %d answers (timeouts, errors) had no handler time. Goroutine scheduling latency is "+
		"the Go runtime's /sched/latencies of this process (load generator and herald), %d scheduling events during "+
		"the burst.", noHandler, nSched)
	r.Latencies("HIGH", "HIGH due → provider call", high, "≤ 200")
	r.Latencies("HIGH during the burst", "HIGH due → provider call", highBurst, "")
	r.Add(result.Figure{Group: "HIGH", Name: "HIGH not sent by the end", Value: float64(highUnsent), Unit: "count", Better: "lower"})
	maxBacklog := backlog.Peak()
	r.Add(result.Figure{Name: "max backlog", Value: maxBacklog, Unit: "deliveries", Better: "lower"})
	r.Add(result.Figure{Name: "peak sent", Value: sent.Peak(), Unit: "calls/s", Better: "higher"})
	r.Add(result.Figure{Name: "sent during the load", Value: float64(countBetween(calls, start, loadEnd)) / steady.Seconds(), Unit: "calls/s", Better: "higher"})

	// What this machine holds, from the figures above.
	sentRate := float64(len(calls)) / finished.Sub(start).Seconds()
	left := lastBacklog.Load()
	if drained.IsZero() {
		r.Add(result.Figure{Name: "backlog left after the drain window", Value: float64(left), Unit: "deliveries", Better: "lower"})
	} else {
		r.Add(result.Figure{Name: "time to drain", Value: drained.Sub(answered).Seconds(), Unit: "s", Better: "lower"})
	}
	loadTime := answered.Sub(start).Seconds()
	v := seedVerdict{
		steadyRate: steadyRate, steadyShare: float64(steadyAccepted) / (steadyRate * steady.Seconds()),
		steadyP99: ms(steadyLatency, 99), burstRate: burstRate, burstOffered: burstOffered,
		burstAccepted: int(burstAccepted.Load()), peakAccepted: peakAccepted, burstP99: ms(burstLatency, 99),
		refusals: describeRefusals(kinds, refusedBy), acceptedPerS: float64(nAccepted.Load()) / loadTime,
		sentPerS: float64(countBetween(calls, start, answered)) / loadTime, campaign: users, maxBacklog: maxBacklog,
		drained: !drained.IsZero(), drainTime: drained.Sub(answered), drainCap: drainCap, left: left, sentRate: sentRate,
		peakSent: sent.Peak(), highP50: ms(high, 50), highP99: ms(high, 99), highBurstP99: ms(highBurst, 99),
		highBurst: int(highBurst.TotalCount()), highUnsent: highUnsent,
		poolConns: s.pool.Config().MaxConns, maxPoolWait: maxPoolWait,
		burstUnsent: int(burstUnsent.Load()), answerP99: max(ms(steadyAnswer, 99), ms(burstAnswer, 99)),
		answerTargetP99: float64((ingest.DefaultAdmissionWait + 100*time.Millisecond).Milliseconds()),
	}
	for _, n := range v.notes() {
		r.Note("%s", n)
	}
	stagesNote(r)
	// The HIGH stages over the whole run and for the HIGH accepted during the burst.
	for _, ph := range []struct {
		name     string
		from, to time.Time
	}{{"run", start, finished}, {"burst", burstAt, burstAt.Add(burst)}} {
		stages := st.breakdown(ph.from, ph.to)
		stages.report(r, ph.name)
		stages.log(b, ph.name)
	}
	r.Note("A POST counts as refused when it is answered with a status other than 202 (\"http <status>\"), or not "+
		"answered within %s (\"timeout\"), or fails otherwise (\"error\"). The generator sends from a bounded pool "+
		"(%d workers for the steady load, %d with a connection each for the burst); a POST that falls due while every "+
		"worker is busy and the queue is full is counted as \"not sent by the generator\" (herald never saw it), not "+
		"as refused. \"sent → answer\" is herald's answer time, which the admission wait bounds; \"due → answer\" "+
		"adds the generator's queue. The generator runs on this machine, so its CPU is part of the "+
		"machine's load.", loadClient.Timeout, steadyWorkers, burstWorkers)
	b.ReportMetric(sustained, "steady-accepted/s")
	b.ReportMetric(peakAccepted, "peak-accepted/s")
	b.ReportMetric(ms(high, 99), "high-p99-ms")
	b.ReportMetric(ms(steadyAnswer, 99), "normal-steady-answer-p99-ms")
	b.ReportMetric(ms(burstAnswer, 99), "normal-burst-answer-p99-ms")
	b.ReportMetric(ms(highAnswer, 99), "high-answer-p99-ms")
	b.Logf("sent → answer p50 / p99 ms (target NORMAL p99 %s): NORMAL steady %.1f / %.1f, NORMAL burst %.1f / %.1f, HIGH %.1f / %.1f",
		answerTarget, ms(steadyAnswer, 50), ms(steadyAnswer, 99), ms(burstAnswer, 50), ms(burstAnswer, 99),
		ms(highAnswer, 50), ms(highAnswer, 99))
	b.Logf("answer split, ms: %s; %s; %s; goroutine scheduling latency p99 steady %.1f, burst %.1f ms",
		steadySplit.logLine("NORMAL steady"), burstSplit.logLine("NORMAL burst"), highSplit.logLine("HIGH"), steadySched, burstSched)
	b.ReportMetric(maxBacklog, "max-backlog")
	for _, n := range r.Notes {
		b.Log(n)
	}
	heraldtest.Must(b, r.Write())
}

// The seed-load generator's bounds: the steady load's workers share loadClient's 512
// connections (at 600/s, a few dozen are in flight); the burst's each have a connection of
// burstClient, so a worker never waits inside the client for a connection.
const (
	steadyWorkers = 512
	burstWorkers  = 2000
)

var burstClient = &http.Client{
	Timeout: loadClient.Timeout,
	Transport: &http.Transport{
		MaxIdleConnsPerHost: burstWorkers,
		MaxConnsPerHost:     burstWorkers,
		IdleConnTimeout:     30 * time.Second,
	},
}

// countBetween counts the calls in [from, to).
func countBetween(calls []dispatch.Call, from, to time.Time) int {
	n := 0
	for _, c := range calls {
		if !c.At.Before(from) && c.At.Before(to) {
			n++
		}
	}
	return n
}

func describeRefusals(kinds []string, by map[string]int) string {
	if len(kinds) == 0 {
		return "none refused"
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", by[k], k))
	}
	return strings.Join(parts, ", ")
}
