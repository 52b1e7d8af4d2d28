// Package dispatch consumes the per-priority delivery topics and turns each due delivery into
// at most one provider call at a time: it dedupes (Redis lease + database claim), keeps every
// provider account under its rate limit with a reserved share for HIGH, calls the sender
// outside any transaction, and records the outcome (SENT, a retry with backoff, FAILED or
// EXPIRED) with a conditional update and one attempt-log row. See docs/dispatch.md.
package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// Dispatcher runs one lane per priority of Config.Run (every priority by default).
type Dispatcher struct {
	cfg          Config
	pool         *pgxpool.Pool
	senders      map[herald.Channel]Sender
	log          *zap.Logger
	limiter      *rateLimiter
	leases       *leases
	metrics      *metrics
	token        string // this process's lease value and rate-log member prefix
	redisTimeout time.Duration
	lanes        map[herald.Priority]*lane
	warmed       atomic.Bool // the HIGH lane's connections are open (warm.go)

	// signals, when set (by a test, before Run), receives the path's signals of every lane.
	signals func(herald.Priority, signal)
}

// redisRetryEvery is how long dispatch stays in degraded mode before it tries Redis again.
const redisRetryEvery = 500 * time.Millisecond

// New validates cfg and builds a Dispatcher. senders maps each channel to its sender; a
// channel without one ends its deliveries FAILED (code NO_SENDER). The pool should allow
// about as many connections as the lanes' total concurrency.
func New(cfg Config, pool *pgxpool.Pool, rdb *redis.Client, senders map[herald.Channel]Sender, log *zap.Logger) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("dispatch config: %w", err)
	}
	if pool == nil || rdb == nil || log == nil {
		return nil, fmt.Errorf("dispatch: pool, redis client and logger are required")
	}
	if err := checkFanOutLimits(cfg.RateLimits, senders); err != nil {
		return nil, fmt.Errorf("dispatch config: %w", err)
	}
	m, err := newMetrics()
	if err != nil {
		return nil, fmt.Errorf("dispatch metrics: %w", err)
	}
	m.adapt = cfg.Adapt
	log = log.With(zap.String("component", "dispatch"))
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	health := &redisHealth{retryEvery: redisRetryEvery, log: log}
	d := &Dispatcher{
		cfg: cfg, pool: pool, senders: traceSends(measure(senders, m)), log: log, metrics: m, token: token,
		redisTimeout: cfg.RedisTimeout,
		leases:       &leases{rdb: rdb, prefix: cfg.RedisPrefix, health: health},
		limiter: &rateLimiter{
			rdb: rdb, prefix: cfg.RedisPrefix, limits: cfg.RateLimits, shares: cfg.RateShares,
			window: time.Second + cfg.RateWindowMargin, procs: cfg.DegradedProcesses,
			timeout: cfg.RedisTimeout, health: health, member: token, local: make(map[string][]time.Time),
		},
		lanes: make(map[herald.Priority]*lane, len(cfg.Run)),
	}
	total := 0
	for _, p := range cfg.Run {
		d.lanes[p] = newLane(d, p)
		total += cfg.Lanes[p].Concurrency
	}
	if conns := int(pool.Config().MaxConns); conns < total {
		// With fewer connections than workers, a HIGH delivery can queue for a connection
		// behind LOW ones.
		log.Warn("database pool smaller than the lanes' total concurrency",
			zap.Int("pool_max_conns", conns), zap.Int("concurrency", total))
	}
	return d, nil
}

// Run consumes until ctx ends, then shuts down gracefully: each lane stops fetching, lets
// in-flight deliveries finish within ShutdownTimeout, commits and leaves its group. It
// returns nil after a clean shutdown.
func (d *Dispatcher) Run(ctx context.Context) error {
	for p, l := range d.lanes {
		if err := l.open(); err != nil {
			for _, o := range d.lanes {
				if o.cl != nil {
					o.cl.Close()
				}
			}
			return fmt.Errorf("dispatch lane %s: kafka client: %w", p, err)
		}
	}
	stopObserving, err := d.observe(ctx)
	if err != nil {
		for _, l := range d.lanes {
			l.cl.Close()
		}
		return fmt.Errorf("dispatch metrics: %w", err)
	}
	defer stopObserving()
	d.limiter.prime(ctx)
	d.log.Info("dispatch running")
	var wg sync.WaitGroup
	wg.Go(func() { d.warm(ctx) })
	var cancelled atomic.Int64
	for _, l := range d.lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cancelled.Add(int64(l.run(ctx)))
		}()
	}
	wg.Wait()
	d.leases.flushes.Wait()
	d.log.Info("dispatch stopped")
	if n := cancelled.Load(); n > 0 {
		return fmt.Errorf("dispatch: %d in-flight deliveries cancelled: %w", n, ErrAbandoned)
	}
	return nil
}

// ErrAbandoned is what Run returns when its context ended and in-flight deliveries did not
// finish within ShutdownTimeout: they were cancelled, and their rows are left to the reaper
// (a SENDING row past its lease goes back to PENDING with an AMBIGUOUS attempt).
var ErrAbandoned = errors.New("in-flight work abandoned at the shutdown deadline")
