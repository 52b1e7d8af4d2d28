package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
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

// phase is one rate's measurement so far, over one or more slices.
type phase struct {
	rate                    int
	load                    openloop.Stats
	fromDue, insert, commit *hdrhistogram.Histogram
	invisible               int
}

// latencies runs one open-loop phase per rate on one running client. With cfg.Slices the
// phases come from in, one slice per line ("<rate> <duration>", answered with a line
// "slice done" on out once its jobs have started), so that another system's slices can run
// between them; each rate is reported over all its slices when in ends.
func (b *bench) latencies(ctx context.Context, in io.Reader, out io.Writer) error {
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
	var phases []*phase
	at := func(rate int) *phase {
		for _, p := range phases {
			if p.rate == rate {
				return p
			}
		}
		p := &phase{rate: rate, fromDue: result.NewLatency(), insert: result.NewLatency(), commit: result.NewLatency()}
		phases = append(phases, p)
		return p
	}
	if !b.cfg.Slices {
		for _, rate := range b.cfg.Rates {
			if err := b.slice(ctx, client, at(rate), b.cfg.Phase); err != nil {
				return err
			}
		}
	} else {
		fmt.Fprintln(out, sliceReady)
		lines := bufio.NewScanner(in)
		for lines.Scan() {
			var rate int
			var d time.Duration
			f := strings.Fields(lines.Text())
			if len(f) != 2 {
				return fmt.Errorf("slice %q: want \"<rate> <duration>\"", lines.Text())
			}
			if rate, err = strconv.Atoi(f[0]); err != nil || rate <= 0 {
				return fmt.Errorf("slice %q: bad rate", lines.Text())
			}
			if d, err = time.ParseDuration(f[1]); err != nil || d <= 0 {
				return fmt.Errorf("slice %q: bad duration", lines.Text())
			}
			if err := b.slice(ctx, client, at(rate), d); err != nil {
				return err
			}
			fmt.Fprintln(out, sliceDone)
		}
		if err := lines.Err(); err != nil {
			return fmt.Errorf("read slices: %w", err)
		}
	}
	for _, p := range phases {
		b.report(p)
	}
	return nil
}

// The lines of the slice protocol on stdout (bench/internal/riverbench reads them).
const (
	sliceReady = "slices: ready"
	sliceDone  = "slice done"
)

// slice inserts p.rate jobs/s for d, open loop, waits (up to the tail) for them to start,
// and adds them to p.
func (b *bench) slice(ctx context.Context, client *river.Client[pgx.Tx], p *phase, d time.Duration) error {
	rate := p.rate
	jobs := make([]job, int(float64(rate)*d.Seconds()))
	var inserted atomic.Int64
	base := b.started.count()
	stop := result.Progress(ctx, os.Stderr, "relay", 5*time.Second, func() string {
		return fmt.Sprintf("River at %d jobs/s: %d inserted, %d worked", rate, inserted.Load(), b.started.count()-base)
	})
	defer stop()
	st, err := openloop.Run(ctx, openloop.Config{Rate: float64(rate), Duration: d, Workers: b.cfg.Conns},
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

	p.load = p.load.Add(st)
	for _, j := range jobs {
		at, ok := b.started.get(j.id)
		if !ok {
			at = waited
			p.invisible++
		} else {
			_ = p.commit.RecordValue(max(1, at.Sub(j.commit).Microseconds()))
		}
		_ = p.fromDue.RecordValue(max(1, at.Sub(j.due).Microseconds()))
		_ = p.insert.RecordValue(max(1, j.commit.Sub(j.due).Microseconds()))
	}
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
