// Package openloop drives a load at a fixed rate that does not wait for the system under
// test: call i is due at start + i/rate whatever happened to the calls before it, so that a
// slow system is charged with the time its callers would have waited (no coordinated
// omission). A caller counts latency from the due time it is handed, not from when its call
// started. When every worker is busy the schedule slips; Stats says by how much.
//
// It imports only the standard library, so that bench/river (its own module) shares it.
package openloop

import (
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
}

// Stats is what a phase achieved.
type Stats struct {
	Calls   int           // calls made
	Elapsed time.Duration // from the first due time until the last call returned
	// MaxBehind is the longest a call started after its due time: how far the generator
	// fell behind its schedule (all workers busy, or the machine too loaded to wake it).
	MaxBehind time.Duration
	// Behind is how many calls started more than a millisecond late.
	Behind int
}

// Rate is the rate achieved, calls per second.
func (s Stats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Calls) / s.Elapsed.Seconds()
}

// Run makes Rate × Duration calls of call, each handed its sequence number and due time, and
// returns when all have returned. The first error stops the schedule and is returned.
func Run(ctx context.Context, cfg Config, call func(ctx context.Context, i int, due time.Time) error) (Stats, error) {
	if cfg.Rate <= 0 || cfg.Duration <= 0 || cfg.Workers <= 0 {
		return Stats{}, fmt.Errorf("open loop: rate %v, duration %v, workers %d: want all positive", cfg.Rate, cfg.Duration, cfg.Workers)
	}
	total := int(cfg.Rate * cfg.Duration.Seconds())
	interval := float64(time.Second) / cfg.Rate
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		next      atomic.Int64
		behind    atomic.Int64
		maxBehind atomic.Int64
		once      sync.Once
		firstErr  error
		wg        sync.WaitGroup
	)
	start := time.Now()
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
				if late := time.Since(due); late > time.Millisecond {
					behind.Add(1)
					for m := maxBehind.Load(); int64(late) > m && !maxBehind.CompareAndSwap(m, int64(late)); m = maxBehind.Load() {
					}
				}
				if err := call(ctx, i, due); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	st := Stats{Calls: min(int(next.Load()), total), Elapsed: time.Since(start),
		MaxBehind: time.Duration(maxBehind.Load()), Behind: int(behind.Load())}
	if firstErr != nil {
		return st, fmt.Errorf("open loop at %v/s: %w", cfg.Rate, firstErr)
	}
	return st, ctx.Err()
}
