package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/riverqueue/river"

	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/sleep"
)

// drainLimit bounds the drain; River drains 100,000 jobs in seconds here.
const drainLimit = 3 * time.Minute

// drainSample is how often the drain samples the jobs worked.
const drainSample = 50 * time.Millisecond

// drain inserts the backlog while no client works (InsertManyFast, River's COPY path, 10,000
// jobs per transaction), then starts a client and measures until every job has started.
func (b *bench) drain(ctx context.Context) error {
	inserter, err := newClient(b.pool, b.cfg, b.started)
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	params := make([]river.InsertManyParams, 0, 10_000)
	for from := 0; from < b.cfg.Backlog; from += 10_000 {
		params = params[:0]
		for range min(10_000, b.cfg.Backlog-from) {
			params = append(params, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := inserter.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("insert backlog: %w", err)
		}
	}

	base := b.started.count()
	stop := result.Progress(ctx, os.Stderr, "relay", 5*time.Second, func() string {
		return fmt.Sprintf("River draining %d: %d worked", b.cfg.Backlog, b.started.count()-base)
	})
	defer stop()
	client, err := newClient(b.pool, b.cfg, b.started)
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	defer func() { _ = client.Stop(context.WithoutCancel(ctx)) }()
	curve := result.Series{Name: group}
	deadline := start.Add(drainLimit)
	var worked int
	var elapsed, first time.Duration // start → all worked (or the limit), start → the first worked
	for {
		now := time.Now()
		worked = b.started.count() - base
		if worked > 0 && first == 0 {
			first = now.Sub(start)
		}
		curve.X = append(curve.X, now.Sub(start).Seconds())
		curve.Y = append(curve.Y, float64(worked))
		if worked >= b.cfg.Backlog || now.After(deadline) {
			elapsed = now.Sub(start)
			break
		}
		if err := sleep.For(ctx, drainSample); err != nil {
			return err
		}
	}
	rate := float64(worked) / elapsed.Seconds()
	// From the first job worked, over at least one sample (the resolution of first).
	afterStartUp := float64(worked) / max(elapsed-first, drainSample).Seconds()
	b.res.Add(result.Figure{Group: group, Name: "drain", Value: rate, Unit: "rows/s", Better: "higher"})
	b.res.Add(result.Figure{Group: group, Name: "drain seconds", Value: elapsed.Seconds(), Unit: "s", Better: "lower"})
	b.res.Add(result.Figure{Group: group, Name: "drain start-up", Value: first.Seconds(), Unit: "s", Better: "lower"})
	b.res.Add(result.Figure{Group: group, Name: "drain after start-up", Value: afterStartUp, Unit: "rows/s", Better: "higher"})
	b.res.Chart(result.Chart{File: chartDrain, Kind: "line", Series: []result.Series{curve}})
	if worked < b.cfg.Backlog {
		b.res.Note("River worked %d of the %d-job backlog in %.1f s and was stopped there.", worked, b.cfg.Backlog, elapsed.Seconds())
	}
	fmt.Printf("River drained %d of %d jobs in %.2f s: %.0f jobs/s (first job after %.2f s; %.0f jobs/s from then on)\n",
		worked, b.cfg.Backlog, elapsed.Seconds(), rate, first.Seconds(), afterStartUp)
	return nil
}
