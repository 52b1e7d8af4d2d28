package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/heraldhq/herald/bench/relay/openloop"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/sleep"
)

// The chart files of bench/relay's scenario, which River's series join.
const (
	chartCDF   = "latency-cdf"
	chartDrain = "drain"
)

type bench struct {
	cfg     config
	pool    *pgxpool.Pool
	res     *result.Result
	started *starts
}

// job is one job the generator inserted.
type job struct {
	id          int64
	due, commit time.Time
}

// latencies runs one open-loop phase per rate on one running client.
func (b *bench) latencies(ctx context.Context) error {
	client, err := newClient(b.pool, b.cfg, b.started)
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	defer func() { _ = client.Stop(context.WithoutCancel(ctx)) }()
	// Warm up: connections, the leader, the first fetch.
	warm := make([]job, 10)
	for i := range warm {
		r, err := client.Insert(ctx, noopArgs{}, nil)
		if err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		warm[i].id = r.Job.ID
	}
	if err := b.wait(ctx, warm, time.Minute); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for _, rate := range b.cfg.Rates {
		if err := b.phase(ctx, client, rate); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) phase(ctx context.Context, client *river.Client[pgx.Tx], rate int) error {
	jobs := make([]job, int(float64(rate)*b.cfg.Phase.Seconds()))
	var inserted atomic.Int64
	base := b.started.count()
	stop := result.Progress(ctx, os.Stderr, "relay", 5*time.Second, func() string {
		return fmt.Sprintf("River at %d jobs/s: %d inserted, %d worked", rate, inserted.Load(), b.started.count()-base)
	})
	defer stop()
	st, err := openloop.Run(ctx, openloop.Config{Rate: float64(rate), Duration: b.cfg.Phase, Workers: b.cfg.Conns},
		func(ctx context.Context, i int, due time.Time) error {
			r, err := client.Insert(ctx, noopArgs{}, nil)
			if err != nil {
				return fmt.Errorf("insert job: %w", err)
			}
			jobs[i] = job{id: r.Job.ID, due: due, commit: time.Now()}
			inserted.Add(1)
			return nil
		})
	if err != nil {
		return err
	}
	jobs = slices.DeleteFunc(jobs, func(j job) bool { return j.id == 0 }) // skipped by the generator
	// Jobs not started within the tail are counted below.
	_ = b.wait(ctx, jobs, b.cfg.Tail)
	waited := time.Now()

	fromDue, commit := result.NewLatency(), result.NewLatency()
	invisible := 0
	for _, j := range jobs {
		at, ok := b.started.get(j.id)
		if !ok {
			at = waited
			invisible++
		} else {
			_ = commit.RecordValue(max(1, at.Sub(j.commit).Microseconds()))
		}
		_ = fromDue.RecordValue(max(1, at.Sub(j.due).Microseconds()))
	}
	b.report(rate, st, fromDue, commit, invisible)
	return nil
}

// wait waits until every job has started, or timeout passes.
func (b *bench) wait(ctx context.Context, jobs []job, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i := 0; i < len(jobs); {
		if _, ok := b.started.get(jobs[i].id); ok {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs not worked after %v", len(jobs)-i, len(jobs), timeout)
		}
		if err := sleep.For(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}
