package e2e

import (
	"fmt"
	"math"
	"net/http"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/heraldhq/herald/bench/result"
)

// answerTimes splits each POST's answer time as the generator saw it (sent → answered) into
// the part inside herald's handler (from the moment the server hands the request to the
// handler to the handler's return) and the rest: the server reading the request, the
// goroutines of both sides waiting for a core, and the client's own work. The split says
// whether an answer that came late waited in herald's handler (admission, the accept) or
// before and after it.
type answerTimes struct {
	mu     sync.Mutex
	inside map[string]time.Duration // by Idempotency-Key
}

func newAnswerTimes() *answerTimes { return &answerTimes{inside: map[string]time.Duration{}} }

// wrap times h for every request that carries an Idempotency-Key.
func (t *answerTimes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		began := time.Now()
		h.ServeHTTP(w, r)
		if key == "" {
			return
		}
		d := time.Since(began)
		t.mu.Lock()
		t.inside[key] = d
		t.mu.Unlock()
	})
}

// take returns and forgets the handler time of the request with Idempotency-Key key; ok is
// false when the handler did not run for it (the client gave up first, or the key is not one
// of the generator's).
func (t *answerTimes) take(key string) (d time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok = t.inside[key]
	delete(t.inside, key)
	return d, ok
}

// answerSplit is the split of one kind of POST's answers: inside the handler, and outside it;
// and, from the client's trace when the generator runs in a process of its own, the outside
// split again: sent → request written (a connection, a new one's dial and the server's accept
// included, and the write), written → first byte of the answer less the handler's time (the
// server reading the request and handing it over, and writing the answer), first byte →
// answered (the client reading it).
type answerSplit struct {
	inside, outside          *hdrhistogram.Histogram
	toWritten, server, toEnd *hdrhistogram.Histogram
	newConns                 *int
}

func newAnswerSplit() answerSplit {
	return answerSplit{inside: result.NewLatency(), outside: result.NewLatency(), toWritten: result.NewLatency(),
		server: result.NewLatency(), toEnd: result.NewLatency(), newConns: new(int)}
}

// add records one answer of total sent → answered, of which inside in the handler.
func (s answerSplit) add(total, inside time.Duration) {
	record(s.inside, inside)
	record(s.outside, max(total-inside, 0))
}

// addTrace records the client's trace of one answer (zero times: not traced).
func (s answerSplit) addTrace(l loadLine, inside time.Duration) {
	if l.Wrote.IsZero() || l.FirstByte.IsZero() {
		return
	}
	if l.NewConn {
		*s.newConns++
	}
	record(s.toWritten, l.Wrote.Sub(l.Sent))
	record(s.server, max(l.FirstByte.Sub(l.Wrote)-inside, 0))
	record(s.toEnd, l.Answered.Sub(l.FirstByte))
}

// report adds the split's figures to group.
func (s answerSplit) report(r *result.Result, group, kind string) {
	r.Latencies(group, kind+" POST in herald's handler", s.inside, "")
	r.Latencies(group, kind+" POST outside the handler (server read, scheduling, client)", s.outside, "")
	if s.toWritten.TotalCount() == 0 {
		return
	}
	r.Latencies(group, kind+" POST sent → request written (connection, write)", s.toWritten, "")
	r.Latencies(group, kind+" POST written → first byte, less the handler (server read, hand-over, answer write)", s.server, "")
	r.Latencies(group, kind+" POST first byte → answered (client read)", s.toEnd, "")
	r.Add(result.Figure{Group: group, Name: kind + " POSTs sent on a new connection", Value: float64(*s.newConns), Unit: "POSTs"})
}

// logLine is the split's p99s for the benchmark's log.
func (s answerSplit) logLine(kind string) string {
	return fmt.Sprintf("%s p99: handler %.1f, outside %.1f (to written %.1f, server less handler %.1f, client read %.1f; %d new conns)",
		kind, ms(s.inside, 99), ms(s.outside, 99), ms(s.toWritten, 99), ms(s.server, 99), ms(s.toEnd, 99), *s.newConns)
}

// schedLatency reads the Go runtime's scheduling latencies (/sched/latencies:seconds: how long
// goroutines of this process waited, runnable, for a core), cumulative since the start.
type schedLatency struct{ sample []metrics.Sample }

func newSchedLatency() *schedLatency {
	return &schedLatency{sample: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
}

// snapshot is the cumulative histogram now.
func (s *schedLatency) snapshot() *metrics.Float64Histogram {
	metrics.Read(s.sample)
	h := s.sample[0].Value.Float64Histogram()
	return &metrics.Float64Histogram{Counts: append([]uint64(nil), h.Counts...), Buckets: h.Buckets}
}

// quantileSince is the quantile q (0..1) of the latencies between the snapshots from and to,
// in ms (the upper bound of its bucket), and how many there were.
func quantileSince(from, to *metrics.Float64Histogram, q float64) (ms float64, n uint64) {
	for i := range to.Counts {
		n += to.Counts[i] - from.Counts[i]
	}
	if n == 0 {
		return 0, 0
	}
	want := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i := range to.Counts {
		seen += to.Counts[i] - from.Counts[i]
		if seen >= want {
			upper := to.Buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = to.Buckets[i]
			}
			return upper * 1000, n
		}
	}
	return to.Buckets[len(to.Buckets)-1] * 1000, n
}
