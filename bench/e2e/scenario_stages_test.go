package e2e

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/bench/result"
)

// stageTracer records the OpenTelemetry spans herald emits, in this process, for the traces
// the bench starts itself (a traceparent it sends with a request) and for no other: a
// campaign's million deliveries make no spans, so recording costs the measured run nothing
// beyond the HIGH notifications it follows.
type stageTracer struct {
	mu  sync.RWMutex
	ids map[trace.TraceID]bool
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
	// also, when set, returns the spans another process recorded for the bench's traces
	// (the HIGH dispatch process's, high_process_test.go).
	also func() []sdktrace.ReadOnlySpan
}

func newStageTracer() *stageTracer {
	st := &stageTracer{ids: map[trace.TraceID]bool{}, rec: tracetest.NewSpanRecorder()}
	st.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(st), sdktrace.WithSpanProcessor(st.rec))
	return st
}

// traceparent starts a trace the tracer records and returns its W3C traceparent header.
func (st *stageTracer) traceparent() string {
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	st.mu.Lock()
	st.ids[tid] = true
	st.mu.Unlock()
	return fmt.Sprintf("00-%s-%s-01", tid, sid)
}

// ShouldSample implements sdktrace.Sampler: record the bench's own traces only.
func (st *stageTracer) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	st.mu.RLock()
	ok := st.ids[p.TraceID]
	st.mu.RUnlock()
	if !ok {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample,
		Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
}

// Description implements sdktrace.Sampler.
func (st *stageTracer) Description() string { return "bench traces only" }

// The HIGH stages, each between two span boundaries of one delivery's trace:
//
//	accept            ingest.accept starts (the request is decoded and admitted)
//	accept commit     ingest.accept ends (its one INSERT statement has committed: for a HIGH
//	                  that the accepting process publishes, visible and not yet flushed; the
//	                  span ingest.durable waits for the flush beside the stages that follow)
//	published         the publish span of the record the worker took starts: ingest publish
//	                  (the accepting process, right after the commit) or cdc publish (the
//	                  relay decoded the row from the WAL, or the sweeper found it)
//	Kafka ack         cdc publish ends (its produce callback: the broker acknowledged)
//	consumed          dispatch.deliver starts (a lane polled the record), the child of that publish
//	claimed           dispatch.rate_limit starts (the claim committed; the limiter is asked next)
//	provider called   dispatch.send starts, in the same deliver span
//	outcome committed dispatch.deliver ends (the outcome is written)
var stageNames = []string{
	"accept → commit", "commit → WAL decoded / direct publish", "published → Kafka ack", "Kafka ack → consumed",
	"consumed → claimed", "claimed → provider called", "provider called → outcome committed",
}

// acceptStepNames split "accept → commit" at the accept span's events: the accept context
// read (a pool connection and one round trip), the work in Go up to the insert (the rules,
// the render), the insert's one statement and its commit.
var acceptStepNames = []string{
	"accept → context read (pool, read)", "context read → insert started (Go)", "insert started → commit (insert, commit)",
}

// claimStepNames split "consumed → claimed" at the deliver span's events: the rows' read
// (a pool connection and one round trip, and any stale read waited out before it), the work up
// to the claim (the verdict, the message, the Redis lease: one round trip), and the claim's
// one statement and commit until its worker goroutine asks the limiter.
var claimStepNames = []string{
	"consumed → rows read (pool, read, stale waits)", "rows read → claim started (render, Redis lease)",
	"claim started → claimed (claim, commit)",
}

// claimFirstStepNames split "consumed → claimed" of a first attempt that took the shorter way
// (a record alone: the Redis lease, then one statement reads the row and claims it) at the
// same two events, in the other order.
var claimFirstStepNames = []string{
	"consumed → claim started (pool, Redis lease)", "claim started → rows read (read and claim, commit)",
	"rows read → claimed (render)",
}

// outOfOrder says why a stage's two boundaries, read by different goroutines, can come in the
// wrong order.
var outOfOrder = map[string]string{
	"commit → WAL decoded / direct publish": "ingest.accept ends a moment after its commit, and the relay may decode the row " +
		"before the accepting goroutine runs again",
	"Kafka ack → consumed": "a consumer may poll the record before the producer's acknowledgement callback runs",
}

// stages is one histogram per stage, and of the whole chain.
type stages struct {
	h     []*hdrhistogram.Histogram
	steps []*hdrhistogram.Histogram // acceptStepNames
	claim []*hdrhistogram.Histogram // claimStepNames
	// claimFirstStepNames: the chains whose claim was their read (a first attempt alone)
	claimFirst []*hdrhistogram.Histogram
	reread     int // chains whose deliver span read the row more than once
	total      *hdrhistogram.Histogram
	traces     int            // traces with a complete chain
	partial    int            // traces without one (not sent yet, or a span missing)
	negative   map[string]int // per stage: boundaries out of order (two goroutines' clock reads), counted as 1 µs
	// Chains whose sent record came from the sweeper's publish (a row the stream missed or a
	// record that was dropped), from the accepting process's direct publish, and traces with
	// more than one publish by the relay.
	bySweeper, direct, republished int
	handed                         int    // of direct: handed to the HIGH lane in process, not published
	slowest                        string // the source of the slowest chain's publish
	slowestTotal                   time.Duration
	// tail is each stage's mean over the slowest 1 % of the chains (at least one), by accept →
	// provider called: where the tail of HIGH's latency goes, chain by chain, which the
	// stages' own p99s (each in its own moments) do not say.
	tail       []time.Duration
	tailChains int
	tailTotal  time.Duration // their mean accept → provider called
}

// tailShare is the share of the chains that stages.tail averages over.
const tailShare = 0.01

// breakdown reads the recorded spans of the HIGH notifications accepted in [from, to): for
// every trace, the provider call's span, its deliver span, the publish that deliver span
// continues, the accept of the trace.
func (st *stageTracer) breakdown(from, to time.Time) stages {
	out := stages{total: result.NewLatency(), negative: map[string]int{}}
	for range stageNames {
		out.h = append(out.h, result.NewLatency())
	}
	for range acceptStepNames {
		out.steps = append(out.steps, result.NewLatency())
	}
	for range claimStepNames {
		out.claim = append(out.claim, result.NewLatency())
		out.claimFirst = append(out.claimFirst, result.NewLatency())
	}
	type chain struct {
		accept, send sdktrace.ReadOnlySpan
		byID         map[trace.SpanID]sdktrace.ReadOnlySpan
		rateLimit    map[trace.SpanID]sdktrace.ReadOnlySpan // by parent (the deliver span)
		publishes    int
	}
	traces := map[trace.TraceID]*chain{}
	type timed struct {
		toCall time.Duration   // accept → provider called
		stage  []time.Duration // by stageNames
	}
	var chains []timed
	spans := st.rec.Ended()
	if st.also != nil {
		spans = append(spans, st.also()...)
	}
	for _, sp := range spans {
		c := traces[sp.SpanContext().TraceID()]
		if c == nil {
			c = &chain{byID: map[trace.SpanID]sdktrace.ReadOnlySpan{}, rateLimit: map[trace.SpanID]sdktrace.ReadOnlySpan{}}
			traces[sp.SpanContext().TraceID()] = c
		}
		c.byID[sp.SpanContext().SpanID()] = sp
		switch sp.Name() {
		case "ingest.accept":
			c.accept = sp
		case "cdc publish":
			c.publishes++ // the accepting process's own publish, ingest publish, is not counted
		case "dispatch.send":
			if c.send == nil || sp.StartTime().Before(c.send.StartTime()) {
				c.send = sp
			}
		case "dispatch.rate_limit":
			if old, ok := c.rateLimit[sp.Parent().SpanID()]; !ok || sp.StartTime().Before(old.StartTime()) {
				c.rateLimit[sp.Parent().SpanID()] = sp
			}
		}
	}
	for _, c := range traces {
		if c.accept != nil && (c.accept.EndTime().Before(from) || !c.accept.EndTime().Before(to)) {
			continue
		}
		if c.accept == nil || c.send == nil {
			out.partial++
			continue
		}
		deliver, ok := c.byID[c.send.Parent().SpanID()]
		if !ok {
			out.partial++
			continue
		}
		publish, ok := c.byID[deliver.Parent().SpanID()]
		limit, ok2 := c.rateLimit[deliver.SpanContext().SpanID()]
		if !ok || !ok2 || (publish.Name() != "cdc publish" && publish.Name() != "ingest publish") {
			out.partial++
			continue
		}
		at := []time.Time{c.accept.StartTime(), c.accept.EndTime(), publish.StartTime(), publish.EndTime(), deliver.StartTime(),
			limit.StartTime(), c.send.StartTime(), deliver.EndTime()}
		ch := timed{toCall: at[len(at)-2].Sub(at[0]), stage: make([]time.Duration, len(stageNames))}
		for i := range stageNames {
			d := at[i+1].Sub(at[i])
			if d < 0 {
				out.negative[stageNames[i]]++
			}
			record(out.h[i], d)
			ch.stage[i] = max(d, 0)
		}
		chains = append(chains, ch)
		record(out.total, at[len(at)-1].Sub(at[0]))
		if steps, ok := acceptSteps(c.accept); ok {
			for i := range acceptStepNames {
				record(out.steps[i], steps[i+1].Sub(steps[i]))
			}
		}
		if steps, reads, first, ok := claimSteps(deliver, limit.StartTime()); ok {
			hs := out.claim
			if first {
				hs = out.claimFirst
			}
			for i := range hs {
				record(hs[i], steps[i+1].Sub(steps[i]))
			}
			if reads > 1 {
				out.reread++
			}
		}
		out.traces++
		src := attr(publish, "herald.source")
		switch src {
		case "sweeper":
			out.bySweeper++
		case "ingest":
			out.direct++
			if slices.Contains(publish.Attributes(), attribute.Bool("herald.handed", true)) {
				out.handed++
			}
		}
		if c.publishes > 1 {
			out.republished++
		}
		if total := at[len(at)-1].Sub(at[0]); total > out.slowestTotal {
			out.slowestTotal, out.slowest = total, src
		}
	}
	if len(chains) > 0 {
		slices.SortFunc(chains, func(a, b timed) int { return cmp.Compare(b.toCall, a.toCall) })
		out.tailChains = max(1, int(float64(len(chains))*tailShare))
		out.tail = make([]time.Duration, len(stageNames))
		for _, ch := range chains[:out.tailChains] {
			out.tailTotal += ch.toCall / time.Duration(out.tailChains)
			for i, d := range ch.stage {
				out.tail[i] += d / time.Duration(out.tailChains)
			}
		}
	}
	return out
}

// log prints the stages' p50 and p99, the accept's steps and the claim's steps of the phase.
func (s stages) log(b testing.TB, phase string) {
	b.Helper()
	for i, name := range stageNames {
		b.Logf("%s: stage %-40s p50 %7.2f ms  p99 %7.2f ms", phase, name, ms(s.h[i], 50), ms(s.h[i], 99))
	}
	for i, name := range acceptStepNames {
		b.Logf("%s: accept step %-40s p50 %7.2f ms  p99 %7.2f ms", phase, name, ms(s.steps[i], 50), ms(s.steps[i], 99))
	}
	for i, name := range claimStepNames {
		b.Logf("%s: claim step %-48s p50 %7.2f ms  p99 %7.2f ms", phase, name, ms(s.claim[i], 50), ms(s.claim[i], 99))
	}
	for i, name := range claimFirstStepNames {
		b.Logf("%s: claim step %-48s p50 %7.2f ms  p99 %7.2f ms", phase, name, ms(s.claimFirst[i], 50), ms(s.claimFirst[i], 99))
	}
	if s.tail != nil {
		b.Logf("%s: the slowest 1 %% (%d chains, accept → provider called mean %.2f ms), each stage's mean:", phase, s.tailChains,
			float64(s.tailTotal.Microseconds())/1000)
		for i, name := range stageNames[:len(stageNames)-1] { // the outcome comes after the call
			b.Logf("%s: slowest 1 %% %-40s %7.2f ms", phase, name, float64(s.tail[i].Microseconds())/1000)
		}
	}
}

// report adds the stages' figures (group "HIGH stages, <phase>") and their CDF chart to r.
func (s stages) report(r *result.Result, phase string) {
	group := "HIGH stages, " + phase
	for i, name := range stageNames {
		r.Latencies(group, name, s.h[i], "")
	}
	r.Latencies(group, "accept → outcome committed", s.total, "")
	for i, name := range acceptStepNames {
		r.Latencies(group, name, s.steps[i], "")
	}
	for i, name := range claimStepNames {
		r.Latencies(group, name, s.claim[i], "")
	}
	for i, name := range claimFirstStepNames {
		r.Latencies(group, name, s.claimFirst[i], "")
	}
	r.Add(result.Figure{Group: group, Name: "read more than once before the claim", Value: float64(s.reread),
		Unit: "count", Better: "lower"})
	if s.tail != nil {
		r.Add(result.Figure{Group: group, Name: "accept → provider called, mean over the slowest 1 %",
			Value: float64(s.tailTotal.Microseconds()) / 1000, Unit: "ms", Better: "lower"})
		for i, name := range stageNames[:len(stageNames)-1] {
			r.Add(result.Figure{Group: group, Name: name + ", mean over the slowest 1 %",
				Value: float64(s.tail[i].Microseconds()) / 1000, Unit: "ms", Better: "lower"})
		}
	}
	c := result.Chart{File: "high-stages-" + phase, Title: "HIGH stage breakdown during the " + phase + " (CDF per stage)", Kind: "cdf",
		XLabel: "stage duration (ms)", YLabel: "fraction of HIGH deliveries", LogX: true}
	for i, name := range stageNames {
		c.Series = append(c.Series, result.CDF(name, s.h[i]))
	}
	r.Chart(c)
	slowest := ""
	if s.traces > 0 {
		slowest = fmt.Sprintf("; the slowest chain (%s) came from the %s's publish", s.slowestTotal.Round(time.Millisecond), s.slowest)
	}
	r.Note("HIGH stages during the %s: %d HIGH deliveries with a complete chain of spans, %d without one (not sent when "+
		"the run ended, or a span missing); %d sent from the accepting process's own record (published right after the "+
		"commit, or, %d of them, handed to its HIGH lane in process without Kafka: for those, published → Kafka ack is "+
		"the hand-over and Kafka ack → consumed the worker's start), %d from the sweeper's, the rest from the relay's "+
		"stream; %d published more than once by the relay (a row the reaper returned after its QUEUED lease is "+
		"published again)%s.",
		phase, s.traces, s.partial, s.direct, s.handed, s.bySweeper, s.republished, slowest)
	r.Add(result.Figure{Group: "HIGH stages, " + phase, Name: "sent from the sweeper's record",
		Value: float64(s.bySweeper), Unit: "count", Better: "lower"})
	r.Add(result.Figure{Group: "HIGH stages, " + phase, Name: "sent from the accepting process's record",
		Value: float64(s.direct), Unit: "count"})
	r.Add(result.Figure{Group: "HIGH stages, " + phase, Name: "of them handed over in process",
		Value: float64(s.handed), Unit: "count"})
	for _, name := range stageNames {
		if n := s.negative[name]; n > 0 {
			r.Note("%s, %s: in %d of %d HIGH deliveries the later boundary came first, counted as 1 µs (%s).",
				phase, name, n, s.traces, outOfOrder[name])
		}
	}
}

// stagesNote says where the stage breakdown comes from.
func stagesNote(r *result.Result) {
	r.Note("HIGH stage breakdown from OpenTelemetry spans recorded in this process and, when HIGH dispatch runs in a " +
		"process of its own, in that one (on the same clock; only the traces the bench starts, " +
		"one per HIGH POST). Span boundaries mark the stages: accept = ingest.accept start, commit = ingest.accept end (its " +
		"single INSERT has committed; for a HIGH the accepting process publishes, the commit is visible and its flush is " +
		"waited for after the publish, in ingest.durable), WAL decoded / direct publish = the start of the publish span of the record the worker " +
		"took (cdc publish: the relay decoded the row from the WAL; ingest publish: the accepting process published it right " +
		"after the commit), Kafka ack = that publish span's end, consumed = dispatch.deliver start, " +
		"claimed = dispatch.rate_limit start (right after the claim's commit), provider called = dispatch.send start, " +
		"with consumed → claimed split at the deliver span's events \"rows read\" (the last read before the claim) and " +
		"\"claim started\" (the claim's statement sent; the Redis lease is taken between them; a first attempt " +
		"that a worker takes alone is leased first and then read and claimed by one statement, so its two events come in " +
		"the other order, and its steps are given apart), " +
		"outcome committed = dispatch.deliver end. \"Mean over the slowest 1 %%\" takes the 1 %% of the chains slowest " +
		"from accept to the provider call and averages each stage over them: where the tail goes chain by chain. Spans rather than the row's transition_at[]: those hold now() of each " +
		"transaction, its start not its commit, and nothing of the relay or Kafka.")
}

// attr is a span's string attribute, or "".
func attr(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}

// acceptSteps is the accept span's start, its events "accept context read" and "insert
// started", and its end; ok is false when an event is missing (a replayed request).
func acceptSteps(sp sdktrace.ReadOnlySpan) (at [4]time.Time, ok bool) {
	at[0], at[3] = sp.StartTime(), sp.EndTime()
	var read, insert bool
	for _, ev := range sp.Events() {
		switch ev.Name {
		case "accept context read":
			at[1], read = ev.Time, true
		case "insert started":
			at[2], insert = ev.Time, true
		}
	}
	return at, read && insert
}

// claimSteps is the deliver span's start, its last "rows read" and "claim started" events
// before claimed (the rate-limit span's start), and claimed; reads counts the reads before
// it. first says the last two came in the first attempt's order (claim started, then rows
// read: the statement that read the row claimed it), not the path's. ok is false when an
// event is missing.
func claimSteps(deliver sdktrace.ReadOnlySpan, claimed time.Time) (at [4]time.Time, reads int, first, ok bool) {
	at[0], at[3] = deliver.StartTime(), claimed
	var last [2]sdktrace.Event
	for _, ev := range deliver.Events() {
		if ev.Time.After(claimed) {
			break
		}
		if ev.Name != "rows read" && ev.Name != "claim started" {
			continue
		}
		if ev.Name == "rows read" {
			reads++
		}
		last[0], last[1] = last[1], ev
	}
	if last[0].Name == "" || last[0].Name == last[1].Name {
		return at, reads, false, false
	}
	at[1], at[2] = last[0].Time, last[1].Time
	return at, reads, last[0].Name == "claim started", true
}
