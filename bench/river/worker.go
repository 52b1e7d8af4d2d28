package main

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// noopArgs is the job: nothing to do, so that the figures are River's own.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

// starts records when each job's Work began, by job id.
type starts struct {
	mu     sync.Mutex
	at     map[int64]time.Time
	worked atomic.Int64
}

func newStarts() *starts { return &starts{at: map[int64]time.Time{}} }

func (s *starts) record(id int64, at time.Time) {
	s.mu.Lock()
	if _, ok := s.at[id]; !ok {
		s.at[id] = at
		s.worked.Add(1)
	}
	s.mu.Unlock()
}

func (s *starts) get(id int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.at[id]
	return at, ok
}

func (s *starts) count() int { return int(s.worked.Load()) }

// noopWorker records the time Work starts and returns.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	starts *starts
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	w.starts.record(job.ID, time.Now())
	return nil
}

// newClient is a River client tuned for latency and throughput on this machine: MaxWorkers
// jobs fetched and run at once (a no-op job costs a goroutine, so many workers mean large
// fetches, not CPU), FetchCooldown the least time between two fetches (River's default 100 ms
// would floor the latency at up to 100 ms), and FetchPollInterval the fallback fetch when no
// insert notification arrives (default 1 s).
func newClient(pool *pgxpool.Pool, cfg config, s *starts) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{starts: s})
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:           workers,
		FetchCooldown:     cfg.FetchCooldown,
		FetchPollInterval: cfg.FetchPollInterval,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
}
