package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// withEventsOff returns the database URL with the session setting herald.events = off,
// the setting herald serve --events=false gives its sessions: the outbox triggers then write
// nothing.
func withEventsOff(b *testing.B, dbURL string) string {
	b.Helper()
	u, err := url.Parse(dbURL)
	heraldtest.Must(b, err)
	q := u.Query()
	q.Set("herald.events", "off")
	u.RawQuery = q.Encode()
	return u.String()
}

// BenchmarkThroughputEventsOnOff measures what the status events cost end to end: the
// throughput of BenchmarkThroughputLimitsLifted (a NORMAL backlog, no rate limit, a provider
// that answers at once; from the first insert to the last SENT) with events written and
// streamed to Kafka, and with --events=false, alternately (on, off, off, on, on, off, off,
// on: each position in the order is as often on as off), each run on a fresh database, so
// that both see the same machine. A first, smaller run with events on warms the machine up
// (Kafka, PostgreSQL's caches) and is not counted. Each delivery's SENDING → SENT writes one
// event; with events on the run checks that every SENT has its event.
//
//	go test -run '^$' -bench ThroughputEventsOnOff -benchtime 1x -timeout 30m ./bench/e2e
//
// BENCH_SCALE scales the backlog of each run (30,000 at 1).
func BenchmarkThroughputEventsOnOff(b *testing.B) {
	backlog := result.Scaled(30_000, 500)
	order := []bool{true, false, false, true, true, false, false, true}
	rates := map[bool][]float64{}
	warm, _ := throughputRun(b, max(backlog/5, 500), false)
	b.Logf("warm-up run, events on: %.0f deliveries/s (not counted)", warm)
	for i, on := range order {
		rate, events := throughputRun(b, backlog, !on)
		rates[on] = append(rates[on], rate)
		b.Logf("run %d, events %v: %.0f deliveries/s; %d events in the outbox; load average %s", i+1, on, rate, events, loadAverage())
		if on && events != backlog {
			b.Fatalf("events on: %d events for %d SENT deliveries", events, backlog)
		}
		if !on && events != 0 {
			b.Fatalf("events off: %d events written", events)
		}
	}
	mean := func(xs []float64) float64 {
		var sum float64
		for _, x := range xs {
			sum += x
		}
		return sum / float64(len(xs))
	}
	on, off := mean(rates[true]), mean(rates[false])
	b.ReportMetric(on, "deliveries/s-events-on")
	b.ReportMetric(off, "deliveries/s-events-off")
	b.ReportMetric(100*(1-on/off), "events-cost-%")
	b.Logf("%d NORMAL deliveries per run: events on %.0f deliveries/s (runs %.0f), off %.0f (runs %.0f): events cost %.1f %% of deliveries/s",
		backlog, on, rates[true], off, rates[false], 100*(1-on/off))
}

// throughputRun runs one herald with events on or off, drains a backlog of n NORMAL
// deliveries and returns the deliveries/s from the first insert to the last SENT and the
// number of events written.
func throughputRun(b *testing.B, n int, eventsOff bool) (float64, int) {
	s := startStack(b, options{poolConns: 80, eventsOff: eventsOff, concurrency: map[herald.Priority]int{
		herald.PriorityHigh: 4, herald.PriorityNormal: 64, herald.PriorityLow: 4}})
	defer s.stop()
	s.insertBacklogAs(b, n, herald.PriorityNormal)
	heraldtest.WaitForEvery(b, 10*time.Minute, 500*time.Millisecond, "every delivery sent", func() bool {
		var sent int
		heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE status = 'SENT'`).Scan(&sent))
		return sent == n
	})
	var first, last time.Time
	var events int
	heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT min(created_at), max(sent_at),
		(SELECT count(*) FROM delivery_event WHERE type = 'herald.delivery.sent') FROM delivery`).Scan(&first, &last, &events))
	return float64(n) / last.Sub(first).Seconds(), events
}
