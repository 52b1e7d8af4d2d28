// Package partition keeps the daily partitions of notification, delivery and
// delivery_attempt (migration 00060, docs/architecture.md "Partitions and retention"): it
// creates each day's partitions ahead of time and drops a day's partitions once the day is
// older than the retention and every delivery of it is final.
//
// Every herald process with the relay role runs a Manager; a pass runs only in the process
// that holds the pass's advisory lock, so that one process at a time changes partitions.
package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Defaults of Config.
const (
	DefaultRetention   = 30 * 24 * time.Hour
	DefaultAhead       = 7
	DefaultInterval    = time.Hour
	DefaultLockTimeout = 2 * time.Second
)

// The advisory lock of a pass: one process at a time creates and drops partitions.
const lockSQL = `SELECT pg_try_advisory_lock(hashtextextended('herald.partition', 0))`
const unlockSQL = `SELECT pg_advisory_unlock(hashtextextended('herald.partition', 0))`

// Config of a Manager. Zero fields take the defaults.
type Config struct {
	// Retention: a day's partitions are dropped once the day ended at least this long ago
	// (and every delivery of it is final).
	Retention time.Duration
	// Ahead is how many days after today have their partitions ready.
	Ahead int
	// Interval between two passes; a pass also runs at start-up.
	Interval time.Duration
	// LockTimeout bounds the wait for a table lock when creating or dropping partitions
	// (they take ACCESS EXCLUSIVE on the parent): a pass that cannot get it gives up and the
	// next one tries again, rather than queueing every insert behind it.
	LockTimeout time.Duration
	// Now, when set, replaces the database clock that decides "today" and "past the
	// retention": benchmarks simulate days with it. nil in production.
	Now func() time.Time
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.Ahead = cmp.Or(c.Ahead, DefaultAhead)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.LockTimeout = cmp.Or(c.LockTimeout, DefaultLockTimeout)
	return c
}

func (c Config) validate() error {
	switch {
	case c.Retention < 24*time.Hour:
		return fmt.Errorf("retention %v: at least one day", c.Retention)
	case c.Ahead < 1:
		return fmt.Errorf("ahead %d: at least one day", c.Ahead)
	case c.Interval <= 0 || c.Interval > 6*time.Hour:
		return fmt.Errorf("interval %v: between 0 and 6h", c.Interval)
	case c.LockTimeout <= 0:
		return fmt.Errorf("lock timeout %v: must be positive", c.LockTimeout)
	}
	return nil
}

// Manager creates and drops daily partitions.
type Manager struct {
	cfg     Config
	pool    *pgxpool.Pool
	log     *zap.Logger
	metrics *metrics
}

// New returns a Manager on pool.
func New(cfg Config, pool *pgxpool.Pool, log *zap.Logger) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("partition config: %w", err)
	}
	m, err := newMetrics()
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, pool: pool, log: log.With(zap.String("component", "partition")), metrics: m}, nil
}

// Run runs a pass at once and then every Interval until ctx ends. A failed pass is logged
// and tried again at the next one: the partitions ahead leave days of slack.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := m.Pass(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("partition pass failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Result is what one pass did.
type Result struct {
	Ran     bool  // false: another process held the lock
	Created []Day // days whose partitions were created
	Dropped []Day // days whose partitions were dropped
	Kept    []Kept
}

// Kept is a day past the retention whose partitions stay, and why.
type Kept struct {
	Day    Day
	Reason string // ReasonNotFinal, ReasonReferenced, ReasonLocked
	Count  int64  // deliveries not final, for the first two
}

// Pass creates the partitions of today and the Ahead days after it, and drops the days past
// the retention whose deliveries are all final, under the pass's advisory lock.
func (m *Manager) Pass(ctx context.Context) (Result, error) {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("partition pass: acquire connection: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, lockSQL).Scan(&locked); err != nil {
		return Result{}, fmt.Errorf("partition pass: take lock: %w", err)
	}
	if !locked {
		return Result{}, nil
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), unlockSQL); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // closing the session releases the lock
		}
	}()

	res := Result{Ran: true}
	var now time.Time
	if m.cfg.Now != nil {
		now = m.cfg.Now()
	} else if err := conn.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return res, fmt.Errorf("partition pass: read clock: %w", err)
	}
	have, err := existing(ctx, conn)
	if err != nil {
		return res, err
	}
	created, errCreate := m.create(ctx, conn, DayOf(now), have)
	res.Created = created
	res.Dropped, res.Kept, err = m.retain(ctx, conn, now, have)
	m.metrics.record(res)
	return res, errors.Join(errCreate, err)
}
