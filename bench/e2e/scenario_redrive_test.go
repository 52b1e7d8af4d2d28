package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/redrive"
)

// BenchmarkScenarioHighDuringRedrive is the suite's high-during-redrive scenario: an operator
// re-drives a large set of FAILED LOW deliveries (POST /api/redrives, executed in lots by the
// in-process executor at herald's default --redrive-rate, adaptive as in herald serve) while
// HIGH OTPs arrive open loop; it measures HIGH from the time each POST was due to its provider
// call while the re-drive re-arms its lots and while the re-armed deliveries drain at the SMS
// provider's limit, the re-drive's rate (deliveries re-armed per second) and LOW's calls per
// second. Then, in the same run and under the same HIGH load, a LOW campaign of as many users
// expands (the in-process expander at herald's default --campaign-rate, adaptive too): its
// rate is the one the re-drive's is compared with, and HIGH is measured during it as well.
// Both rates run from the answer of the POST that started the work to its end (the re-drive
// DONE, the campaign out of EXPANDING). HIGH dispatch runs in a process of its own, as in the
// other HIGH scenarios (BENCH_HIGH_PROCESS=false: in this one), and each phase reports the
// HIGH deliveries' stage breakdown from their spans.
//
//	go test -run '^$' -bench ScenarioHighDuringRedrive -benchtime 1x -timeout 30m ./bench/e2e
func BenchmarkScenarioHighDuringRedrive(b *testing.B) {
	const (
		limit    = 500
		highRate = 20.0
	)
	n := result.Scaled(100_000, 2000)
	drain := result.ScaledDuration(30*time.Second, 3*time.Second)
	// BENCH_REDRIVE_RATE sets the executor's pace (deliveries/s; -1 unpaced) to compare paces.
	pace := 0
	if v := os.Getenv("BENCH_REDRIVE_RATE"); v != "" {
		p, err := strconv.Atoi(v)
		heraldtest.Must(b, err)
		pace = p
	}
	// BENCH_REDRIVE_LOT_SIZE sets the executor's lot (--redrive-lot-size) to compare sizes.
	lotSize := 0
	if v := os.Getenv("BENCH_REDRIVE_LOT_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		heraldtest.Must(b, err)
		lotSize = n
	}
	r := result.New("high-during-redrive", "HIGH OTP API accept → provider call while a re-drive of FAILED LOW deliveries runs and drains")
	r.Load = fmt.Sprintf("a re-drive of %d FAILED LOW SMS deliveries (POST /api/redrives, executor pace %s), SMS provider "+
		"limit %d/s; HIGH SMS OTPs open loop at %.0f/s through the re-drive and the first %s of the drain",
		n, map[bool]string{true: "herald's default (--redrive-rate)", false: strconv.Itoa(pace) + " deliveries/s"}[pace == 0],
		limit, highRate, drain)
	st := newStageTracer()
	r.Load += fmt.Sprintf("; re-drive lots of %d", cmp.Or(lotSize, redrive.DefaultLotSize))
	s := startStack(b, options{limit: limit, poolConns: 32, redrive: true, redriveRate: pace, redriveLot: lotSize, expander: true,
		tracer: st.tp, highProcess: highProcess(),
		concurrency: map[herald.Priority]int{herald.PriorityHigh: 12, herald.PriorityNormal: 6, herald.PriorityLow: 8}})
	st.also = s.childSpans
	r.Load += highProcessNote(s)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s.insertFailed(b, n)
	s.addUsers(b, n)
	s.settle(b)
	loadBefore := result.LoadAverage()

	hc := watchHigh(ctx, b, s)
	var refused atomic.Int64

	b.ResetTimer()
	marks := &walMarks{}
	marks.mark(ctx, b, s, "start")
	start := time.Now()
	var doneAt, expStart, expDone, answeredAt atomic.Pointer[time.Time]
	var redriven, expanded atomic.Int64
	watched := make(chan struct{})
	// The operator's POST runs beside the HIGH load, as it would in production: a HIGH POST
	// that falls due while the POST counts its matches is sent when due, not after the
	// answer (when the POST came first, the HIGH POSTs of its 0.3–0.5 s were late by as much,
	// and were the re-drive phase's slowest).
	go func() {
		defer close(watched)
		id, err := s.startRedrive()
		if err != nil {
			b.Errorf("start re-drive: %v", err)
			stop()
			return
		}
		// The re-drive's rate runs from its POST's answer, as the expander's from its
		// campaign's: the POST's count of the matches is the operator's wait, not the
		// executor's pace.
		now := time.Now()
		answeredAt.Store(&now)
		watchRedrive(ctx, b, s, id, drain, marks, &redriven, &expanded, &doneAt, &expStart, &expDone)
	}()
	progress := result.Progress(ctx, os.Stderr, r.Scenario, 5*time.Second, func() string {
		return fmt.Sprintf("re-armed %d of %d; expanded %d of %d; HIGH sent %d; LOW sent %d", redriven.Load(), n,
			expanded.Load(), n, hc.high.Load(), hc.low.Load())
	})
	deadline := start.Add(15 * time.Minute)
	posted := openLoop(ctx, start, highRate, func(at time.Time) bool {
		return expDone.Load() != nil || at.After(deadline)
	}, func(i int, at time.Time) {
		id, why := s.postNotification(ctx, fmt.Sprintf("high-%d", i), herald.PriorityHigh,
			map[string]string{"traceparent": st.traceparent()})
		if why != "" {
			refused.Add(1)
			return
		}
		hc.posted(id, at)
	})
	if expDone.Load() == nil {
		b.Fatalf("re-drive of %d and campaign of %d users not both done after %s", n, n, time.Since(start).Round(time.Second))
	}
	heraldtest.WaitFor(b, 2*time.Minute, "every HIGH sent", hc.allCalled)
	b.StopTimer()
	progress()
	stop()
	<-watched
	end, answered := *doneAt.Load(), *answeredAt.Load()
	r.Note("Load average before %s, after %s (2 cores, shared with PostgreSQL, Kafka, Redis and the load generator).",
		loadBefore, result.LoadAverage())

	took := end.Sub(answered)
	rate := float64(redriven.Load()) / took.Seconds()
	expFrom, expTo := *expStart.Load(), *expDone.Load()
	expRate := float64(expanded.Load()) / expTo.Sub(expFrom).Seconds()
	r.Add(result.Figure{Group: "re-drive", Name: "re-drive", Value: rate, Unit: "deliveries/s",
		Better: "higher", Target: fmt.Sprintf("≥ %.0f (the expander's, same run)", expRate)})
	r.Add(result.Figure{Group: "re-drive", Name: "re-drive time", Value: took.Seconds(), Unit: "s", Better: "lower"})
	r.Add(result.Figure{Group: "re-drive", Name: "re-drive POST (the count of its matches)", Value: answered.Sub(start).Seconds(),
		Unit: "s", Better: "lower"})
	r.Add(result.Figure{Group: "re-drive", Name: "re-drive against the expander", Value: rate / expRate, Unit: "×",
		Better: "higher", Target: "≥ 1"})
	r.Add(result.Figure{Group: "expansion", Name: "campaign expansion", Value: expRate, Unit: "deliveries/s", Better: "higher"})
	b.ReportMetric(rate, "redriven/s")
	b.ReportMetric(expRate, "expanded/s")
	calls := s.calls()
	cdf := result.Chart{File: "high-latency-cdf", Title: "HIGH due → provider call, per phase", Kind: "cdf",
		XLabel: "latency (ms)", YLabel: "fraction of HIGH notifications", LogX: true}
	for _, ph := range []struct {
		name     string
		from, to time.Time
	}{{"re-drive", start, end}, {"drain", end, end.Add(drain)}, {"expansion", expFrom, expTo}} {
		stages := st.breakdown(ph.from, ph.to)
		stages.report(r, ph.name)
		stages.log(b, ph.name)
		h := result.NewLatency()
		hc.latencies(h, ph.from, ph.to)
		low := 0
		for _, c := range calls {
			if !c.At.Before(ph.from) && c.At.Before(ph.to) && c.Message.Priority == herald.PriorityLow {
				low++
			}
		}
		r.Latencies(ph.name, "HIGH due → provider call", h, "≤ 20")
		cdf.Series = append(cdf.Series, result.CDF(ph.name, h))
		r.Add(result.Figure{Group: ph.name, Name: "LOW sent", Value: float64(low) / ph.to.Sub(ph.from).Seconds(), Unit: "deliveries/s", Better: "higher"})
		b.ReportMetric(ms(h, 99), ph.name+"-p99-ms")
		b.Logf("%s (%s): HIGH due → provider call over %d notifications: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; LOW sent %d",
			ph.name, ph.to.Sub(ph.from).Round(time.Millisecond), h.TotalCount(), ms(h, 50), ms(h, 90), ms(h, 99),
			float64(h.Max())/1000, low)
	}
	r.Chart(cdf)
	stagesNote(r)
	b.Log(marks.report(r, redriven.Load(), expanded.Load()))
	b.Logf("re-drive: POST answered in %s, then %d deliveries re-armed in %s (%.0f/s); campaign: %d deliveries expanded in %s (%.0f/s): %.2f×",
		answered.Sub(start).Round(time.Millisecond), redriven.Load(), took.Round(time.Millisecond), rate,
		expanded.Load(), expTo.Sub(expFrom).Round(time.Millisecond), expRate, rate/expRate)
	r.Add(result.Figure{Name: "HIGH POSTs refused", Value: float64(refused.Load()), Unit: "count", Better: "lower", Target: "= 0"})
	r.Note("HIGH latency counts from the time each POST was due (open loop, %d POSTs, %d refused) to the provider's call; "+
		"the drain is measured for a fixed %s after the re-drive's last lot, not to completion.", posted, refused.Load(), drain)
	heraldtest.Must(b, r.Write())
}

// watchRedrive follows re-drive id until it is DONE (doneAt), lets its deliveries drain for
// drain, then starts a LOW campaign by segment (every user addUsers wrote) and follows it until
// it is expanded (expStart, expDone), keeping the counts in redriven and expanded. It returns
// when the campaign is done or ctx ends.
func watchRedrive(ctx context.Context, b *testing.B, s *stack, id string, drain time.Duration, marks *walMarks,
	redriven, expanded *atomic.Int64, doneAt, expStart, expDone *atomic.Pointer[time.Time]) {
	campaign := ""
	fail := func(what string, err error) {
		if ctx.Err() == nil {
			b.Errorf("%s: %v", what, err)
		}
	}
	for ; ctx.Err() == nil; time.Sleep(50 * time.Millisecond) { // a poll of the rows' state, not a wait for a race
		now := time.Now()
		if campaign != "" {
			status, n, err := s.campaignState(ctx, campaign)
			if err != nil {
				fail("campaign state", err)
				return
			}
			expanded.Store(n)
			if status != "EXPANDING" {
				expDone.Store(&now)
				marks.mark(ctx, b, s, "expanded")
				return
			}
			continue
		}
		var status string
		var armed int64
		if err := s.pool.QueryRow(ctx, `SELECT status, redriven FROM redrive WHERE id = $1`, id).Scan(&status, &armed); err != nil {
			fail("re-drive state", err)
			return
		}
		redriven.Store(armed)
		if status == "DONE" && doneAt.Load() == nil {
			doneAt.Store(&now)
			marks.mark(ctx, b, s, "re-driven")
		}
		if d := doneAt.Load(); d != nil && now.Sub(*d) >= drain {
			c, err := s.startCampaign("after-redrive", herald.PriorityLow)
			if err != nil {
				fail("start campaign", err)
				return
			}
			campaign, now = c, time.Now()
			expStart.Store(&now)
			marks.mark(ctx, b, s, "expanding")
		}
	}
}

// insertFailed writes n FAILED LOW SMS deliveries, each with the TRANSIENT attempt that
// failed it, for a re-drive to find.
func (s *stack) insertFailed(b *testing.B, n int) {
	b.Helper()
	s.insertBacklogAs(b, n, herald.PriorityLow, herald.StatusFailed)
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome, provider, provider_code)
SELECT id, 1, now(), 'TRANSIENT', 'sms:twilio', '503' FROM delivery WHERE status = 'FAILED'`)
	heraldtest.Must(b, err)
	_, err = s.pool.Exec(ctx, `VACUUM ANALYZE delivery, delivery_attempt, notification`)
	heraldtest.Must(b, err)
}

// startRedrive re-drives every FAILED SMS delivery through the API and returns its id.
func (s *stack) startRedrive() (string, error) {
	var created struct{ ID string }
	err := s.request(http.MethodPost, "/api/redrives", "redrive-bench",
		`{"filter":{"status":["FAILED"],"channel":"SMS"}}`, http.StatusAccepted, &created)
	return created.ID, err
}

// walMarks are the database's WAL position and checkpoint count at the scenario's moments, so
// that the re-drive's WAL per re-armed delivery is read beside the expansion's per delivery.
type walMarks struct {
	mu sync.Mutex
	at map[string][2]int64 // moment → WAL bytes since 0/0, checkpoints so far
}

func (w *walMarks) mark(ctx context.Context, b *testing.B, s *stack, name string) {
	var lsn, checkpoints int64
	err := s.pool.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint,
		checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter`).Scan(&lsn, &checkpoints)
	if err != nil {
		if ctx.Err() == nil {
			b.Errorf("WAL position: %v", err)
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = map[string][2]int64{}
	}
	w.at[name] = [2]int64{lsn, checkpoints}
}

// report adds, for the re-drive (start → re-driven) and the expansion (expanding → expanded),
// the WAL the PostgreSQL cluster wrote per delivery of the phase and the checkpoints begun in
// it. Both are the cluster's: a stack shared with other work adds its WAL and checkpoints.
func (w *walMarks) report(r *result.Result, redriven, expanded int64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := "WAL per delivery:"
	for _, ph := range []struct {
		group, from, to string
		n               int64
	}{{"re-drive", "start", "re-driven", redriven}, {"expansion", "expanding", "expanded", expanded}} {
		from, ok1 := w.at[ph.from]
		to, ok2 := w.at[ph.to]
		if !ok1 || !ok2 || ph.n == 0 {
			continue
		}
		r.Add(result.Figure{Group: ph.group, Name: "WAL per delivery (the whole PostgreSQL cluster's during the phase, other databases' included)",
			Value: float64(to[0]-from[0]) / float64(ph.n), Unit: "bytes", Better: "lower"})
		r.Add(result.Figure{Group: ph.group, Name: "checkpoints begun", Value: float64(to[1] - from[1]), Unit: "count"})
		line += fmt.Sprintf(" %s %.0f bytes (%d checkpoints begun);", ph.group, float64(to[0]-from[0])/float64(ph.n), to[1]-from[1])
	}
	return line
}
