// Package openloop drives a load at a fixed rate that does not wait for the system under
// test: call i is due at start + i/rate whatever happened to the calls before it, so that a
// slow system is charged with the time its callers would have waited (no coordinated
// omission). A caller counts latency from the due time it is handed, not from when its call
// started. When every worker is busy the schedule slips; Stats says by how much. So that a
// phase ends on time on a machine that cannot hold the rate, no call starts after the
// schedule's end plus a grace; the calls left are counted as skipped.
//
// It imports only the standard library, so that bench/river (its own module) shares it.
package openloop

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one open-loop phase.
type Config struct {
	Rate     float64       // calls per second
	Duration time.Duration // the schedule's length: Rate × Duration calls in all
	Workers  int           // calls in flight at most; each worker takes the next due call
	// Grace is how long after Duration a late call may still start. Default Duration/10.
	Grace time.Duration
}

// Stats is what a phase achieved.
type Stats struct {
	Calls int // calls made
	// Elapsed is from the first due time until the last call started, plus one interval:
	// the span over which the calls were made.
	Elapsed time.Duration
	// MaxBehind is the longest a call started after its due time: how far the generator
	// fell behind its schedule (all workers busy, or the machine too loaded to wake it).
	MaxBehind time.Duration
	// Behind is how many calls started more than a millisecond late.
	Behind int
	// Skipped is how many calls of the schedule were not made: still waiting for a worker
	// when the grace after the schedule's end ran out.
	Skipped int
}

// Rate is the rate achieved, calls per second.
func (s Stats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Calls) / s.Elapsed.Seconds()
}

// Add is s and o together: two phases, or two slices of one phase, as one.
func (s Stats) Add(o Stats) Stats {
	return Stats{Calls: s.Calls + o.Calls, Elapsed: s.Elapsed + o.Elapsed, MaxBehind: max(s.MaxBehind, o.MaxBehind),
		Behind: s.Behind + o.Behind, Skipped: s.Skipped + o.Skipped}
}

// Run makes Rate × Duration calls of call, each handed its sequence number and due time, and
// returns when all have returned. The first error stops the schedule and is returned.
func Run(ctx context.Context, cfg Config, call func(ctx context.Context, i int, due time.Time) error) (Stats, error) {
	if cfg.Rate <= 0 || cfg.Duration <= 0 || cfg.Workers <= 0 {
		return Stats{}, fmt.Errorf("open loop: rate %v, duration %v, workers %d: want all positive", cfg.Rate, cfg.Duration, cfg.Workers)
	}
	total := int(cfg.Rate * cfg.Duration.Seconds())
	interval := float64(time.Second) / cfg.Rate
	grace := cmp.Or(cfg.Grace, cfg.Duration/10)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		next      atomic.Int64
		made      atomic.Int64
		lastStart atomic.Int64 // nanoseconds since start
		behind    atomic.Int64
		maxBehind atomic.Int64
		once      sync.Once
		firstErr  error
		wg        sync.WaitGroup
	)
	start := time.Now()
	cutoff := start.Add(cfg.Duration + grace)
	for range cfg.Workers {
		wg.Go(func() {
			timer := time.NewTimer(0)
			defer timer.Stop()
			<-timer.C
			for {
				i := int(next.Add(1) - 1)
				if i >= total || ctx.Err() != nil {
					return
				}
				due := start.Add(time.Duration(float64(i) * interval))
				if wait := time.Until(due); wait > 0 {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						return
					case <-timer.C:
					}
				}
				now := time.Now()
				if now.After(cutoff) {
					return
				}
				if late := now.Sub(due); late > time.Millisecond {
					behind.Add(1)
					storeMax(&maxBehind, int64(late))
				}
				made.Add(1)
				storeMax(&lastStart, int64(now.Sub(start)))
				if err := call(ctx, i, due); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	st := Stats{Calls: int(made.Load()), Elapsed: time.Duration(lastStart.Load()) + time.Duration(interval),
		MaxBehind: time.Duration(maxBehind.Load()), Behind: int(behind.Load())}
	st.Skipped = total - st.Calls
	if firstErr != nil {
		return st, fmt.Errorf("open loop at %v/s: %w", cfg.Rate, firstErr)
	}
	return st, ctx.Err()
}

// storeMax sets a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for m := a.Load(); v > m && !a.CompareAndSwap(m, v); m = a.Load() {
	}
}
