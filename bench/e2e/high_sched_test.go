package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/bench/result"
)

// highSched follows how the kernel schedules the PostgreSQL backends of the HIGH process's
// sessions (highApplicationName): every 250 ms, the CPU time each has run and the time it
// was runnable but waited for a core (/proc/PID/schedstat). HIGH's due → provider call is a
// chain of round trips to those backends; on a machine whose cores PostgreSQL shares with
// the expander's sessions, the walsender, the broker and herald, the wait for a core is
// where its tail goes (docs/benchmarks.md, "HIGH during an expansion: its PostgreSQL
// sessions wait for a core"). It reads only what this machine shows: a database server
// elsewhere, or a kernel without schedstat, leaves it empty, and the report says so.
type highSched struct {
	mu      sync.Mutex
	samples []schedSample
	why     string // why nothing was sampled, when nothing was
}

type schedSample struct {
	at       time.Time
	backends map[int]schedTimes
}

type schedTimes struct{ cpu, wait time.Duration }

// watchHighSched samples until ctx ends. Without the HIGH process there are no such sessions.
func watchHighSched(ctx context.Context, s *stack) *highSched {
	h := &highSched{}
	if s.high == nil {
		h.why = "HIGH runs in the benchmark's process (BENCH_HIGH_PROCESS=false), whose sessions are not told apart"
		return h
	}
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			h.sample(ctx, s)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *highSched) sample(ctx context.Context, s *stack) {
	rows, err := s.pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, highApplicationName)
	if err != nil {
		return // ctx ended
	}
	defer rows.Close()
	smp := schedSample{at: time.Now(), backends: map[int]schedTimes{}}
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) != nil {
			return
		}
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)) // "cpu_ns wait_ns timeslices"
		f := strings.Fields(string(raw))
		if len(f) < 2 {
			continue
		}
		cpu, err1 := strconv.ParseInt(f[0], 10, 64)
		wait, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 == nil && err2 == nil {
			smp.backends[pid] = schedTimes{time.Duration(cpu), time.Duration(wait)}
		}
	}
	if rows.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(smp.backends) == 0 {
		if h.why == "" {
			h.why = "no /proc/PID/schedstat of the HIGH sessions' backends on this machine"
		}
		return
	}
	h.samples = append(h.samples, smp)
}

// between is what the backends ran and waited from the sample nearest from to the one
// nearest to; a backend that began in between counts whole, one that ended is not counted.
func (h *highSched) between(from, to time.Time) (ran, waited time.Duration, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	nearest := func(at time.Time) int {
		best := -1
		for i, s := range h.samples {
			if best < 0 || absDuration(s.at.Sub(at)) < absDuration(h.samples[best].at.Sub(at)) {
				best = i
			}
		}
		return best
	}
	a, z := nearest(from), nearest(to)
	if a < 0 || z <= a {
		return 0, 0, false
	}
	for pid, end := range h.samples[z].backends {
		begin := h.samples[a].backends[pid]
		ran += end.cpu - begin.cpu
		waited += end.wait - begin.wait
	}
	return ran, waited, true
}

func absDuration(d time.Duration) time.Duration { return max(d, -d) }

// report adds, for a phase in which n HIGH notifications were due, the backends' CPU and
// wait for a core per HIGH notification, and the wait against the CPU.
func (h *highSched) report(r *result.Result, phase string, from, to time.Time, n int64) {
	ran, waited, ok := h.between(from, to)
	if !ok || n == 0 {
		return
	}
	group := "HIGH's PostgreSQL sessions, " + phase
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	r.Add(result.Figure{Group: group, Name: "backends' CPU per HIGH notification", Value: per(ran), Unit: "µs", Better: "lower"})
	r.Add(result.Figure{Group: group, Name: "backends' wait for a core per HIGH notification", Value: per(waited), Unit: "µs", Better: "lower"})
	if ran > 0 {
		r.Add(result.Figure{Group: group, Name: "wait for a core ÷ CPU", Value: float64(waited) / float64(ran), Unit: "ratio", Better: "lower"})
	}
}

// note says why there are no such figures, when there are none.
func (h *highSched) note(r *result.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) == 0 && h.why != "" {
		r.Note("No scheduling figures of HIGH's PostgreSQL sessions: %s.", h.why)
	}
}
