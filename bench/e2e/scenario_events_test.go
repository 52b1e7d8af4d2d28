package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/internal/benchproc"
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
// event; with events on the run checks that every SENT has its event. The suite's events
// scenario (BenchmarkScenarioEvents) makes the same comparison in six runs. Each rate is the
// median of its four runs.
//
//	go test -run '^$' -bench ThroughputEventsOnOff -benchtime 1x -timeout 30m ./bench/e2e
//
// BENCH_SCALE scales the backlog of each run (30,000 at 1).
func BenchmarkThroughputEventsOnOff(b *testing.B) {
	backlog := result.Scaled(30_000, 500)
	order := []bool{true, false, false, true, true, false, false, true}
	rates := map[bool][]float64{}
	warm := throughputRun(b, max(backlog/5, 500), false)
	b.Logf("warm-up run, events on: %.0f deliveries/s (not counted)", warm.whole)
	for i, on := range order {
		run := throughputRun(b, backlog, !on)
		rates[on] = append(rates[on], run.whole)
		b.Logf("run %d, events %v: %.0f deliveries/s (%.0f steady); %d events in the outbox; CPU per delivery: %s; load average %s",
			i+1, on, run.whole, run.steady, run.events, run.cpu, result.LoadAverage())
		if on && run.events != backlog {
			b.Fatalf("events on: %d events for %d SENT deliveries", run.events, backlog)
		}
		if !on && run.events != 0 {
			b.Fatalf("events off: %d events written", run.events)
		}
	}
	on, off := median(rates[true]), median(rates[false])
	b.ReportMetric(on, "deliveries/s-events-on")
	b.ReportMetric(off, "deliveries/s-events-off")
	b.ReportMetric(100*(1-on/off), "events-cost-%")
	b.Logf("%d NORMAL deliveries per run: events on %.0f deliveries/s (runs %.0f), off %.0f (runs %.0f): events cost %.1f %% of deliveries/s",
		backlog, on, rates[true], off, rates[false], 100*(1-on/off))
}

// throughputOutcome is one throughputRun: deliveries/s from the first insert to the last
// SENT (whole) and over the middle 80 % of the SENTs (steady), the sent events in the outbox,
// and the CPU each part of the run took per delivery.
type throughputOutcome struct {
	whole, steady    float64
	events, sessions int
	cpu              cpuPerDelivery
}

// throughputRun runs one herald with events on or off and drains a backlog of n NORMAL
// deliveries.
func throughputRun(b *testing.B, n int, eventsOff bool) throughputOutcome {
	s := startStack(b, options{poolConns: 80, eventsOff: eventsOff, concurrency: map[herald.Priority]int{
		herald.PriorityHigh: 4, herald.PriorityNormal: 64, herald.PriorityLow: 4}})
	defer s.endSessions(b)
	called := s.countCalls()
	before := s.cpuUse(b)
	s.insertBacklogAs(b, n, herald.PriorityNormal)
	s.waitAllSent(b, called, n)
	after := s.cpuUse(b)
	out := throughputOutcome{cpu: after.since(before, n), sessions: len(after.backends) + 1}
	var first, last, p10, p90 time.Time
	heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT min(created_at), max(sent_at),
		percentile_disc(0.1) WITHIN GROUP (ORDER BY sent_at), percentile_disc(0.9) WITHIN GROUP (ORDER BY sent_at),
		(SELECT count(*) FROM delivery_event WHERE type = 'herald.delivery.sent') FROM delivery`).Scan(&first, &last, &p10, &p90, &out.events))
	out.whole = float64(n) / last.Sub(first).Seconds()
	out.steady = 0.8 * float64(n) / max(p90.Sub(p10).Seconds(), 1e-3)
	return out
}

// endSessions stops the stack and ends its database sessions: the pools are closed only when
// the benchmark ends, and a benchmark of several runs would otherwise hold every run's
// connections of a server shared with other work.
func (s *stack) endSessions(b *testing.B) {
	s.stop()
	_, err := s.pool.Exec(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	heraldtest.Must(b, err)
}

// cpuUse is the CPU time (user + system) the parts of a run had taken at one moment: this
// process (herald's API, relay and dispatch), the PostgreSQL sessions of the run's database
// (its walsender apart), the Kafka broker (shared with whatever else runs on the machine)
// and the whole machine (every core).
type cpuUse struct {
	herald, walsender, kafka, machine time.Duration
	backends                          map[int]time.Duration // pid → CPU, every session but the walsender
	walsenderPID                      int
}

// cpuPerDelivery is the CPU each part took per delivery between two cpuUse, in µs.
type cpuPerDelivery struct{ herald, backends, walsender, kafka, machine float64 }

func (c cpuPerDelivery) String() string {
	return fmt.Sprintf("herald %.0f µs, PostgreSQL sessions %.0f µs, walsender %.0f µs, Kafka %.0f µs, machine %.0f µs",
		c.herald, c.backends, c.walsender, c.kafka, c.machine)
}

func (s *stack) cpuUse(b *testing.B) cpuUse {
	b.Helper()
	u := cpuUse{backends: map[int]time.Duration{}, kafka: kafkaCPU(), machine: machineCPU()}
	var ru syscall.Rusage
	heraldtest.Must(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	u.herald = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	rows, err := s.pool.Query(context.Background(), `SELECT pid, backend_type FROM pg_stat_activity WHERE datname = current_database()`)
	heraldtest.Must(b, err)
	defer rows.Close()
	for rows.Next() {
		var pid int
		var typ string
		heraldtest.Must(b, rows.Scan(&pid, &typ))
		if typ == "walsender" {
			u.walsenderPID, u.walsender = pid, processCPU(pid)
		} else {
			u.backends[pid] = processCPU(pid)
		}
	}
	heraldtest.Must(b, rows.Err())
	return u
}

// since is the CPU per delivery from before to u, over n deliveries. A session that ended
// in between is not counted; one that began in between counts whole.
func (u cpuUse) since(before cpuUse, n int) cpuPerDelivery {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	var backends time.Duration
	for pid, t := range u.backends {
		backends += t - before.backends[pid]
	}
	walsender := u.walsender
	if u.walsenderPID == before.walsenderPID {
		walsender -= before.walsender
	}
	return cpuPerDelivery{herald: per(u.herald - before.herald), backends: per(backends), walsender: per(walsender),
		kafka: per(u.kafka - before.kafka), machine: per(u.machine - before.machine)}
}

// processCPU is a process's user + system time (0 when it is gone).
func processCPU(pid int) time.Duration {
	d, _ := benchproc.CPUOf(pid)
	return d
}

// kafkaCPU is the CPU time of the local Kafka broker (the java process running kafka.Kafka).
func kafkaCPU() time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if raw, err := os.ReadFile(d); err == nil && bytes.Contains(raw, []byte("kafka.Kafka")) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return processCPU(pid)
		}
	}
	return 0
}

// machineCPU is the busy time of every core so far (0 when /proc/stat cannot be read).
func machineCPU() time.Duration {
	d, _ := benchproc.MachineCPU()
	return d
}
