package adapt

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/sleep"
)

// Config configures a Controller. The zero value is valid.
type Config struct {
	// Interval is how often the controller reports this process's observations and steps
	// its limiters from the board. Default DefaultInterval.
	Interval time.Duration
	// Targets are the HIGH latency and relay lag past which the limiters shrink.
	Targets Targets
	// Prefix prefixes the board's Redis key. Default "herald:".
	Prefix string
}

// DefaultInterval is Config.Interval's default: a limiter reacts within a quarter second,
// and one report and one read per process per interval cost Redis nothing to speak of.
const DefaultInterval = 250 * time.Millisecond

// freshIntervals is how many intervals a report counts for: a process that missed one
// report (a busy scheduler) is not taken for gone.
const freshIntervals = 4

// Controller is one process's side of the adaptive limits: it gathers what this process
// observes (HIGH latencies in dispatch, the relay's lag), reports it to the board every
// Interval, reads the board back and steps every limiter the process's components took from
// it. A nil *Controller is valid: its limiters stay at their ceilings.
type Controller struct {
	cfg      Config
	board    *Board
	reporter string
	log      *zap.Logger

	high     window
	calm     *calm            // HIGH's calm latency, from the board's signals; owned by Tick
	now      func() time.Time // the clock of calm; time.Now
	relayLag atomic.Int64     // the last relay lag observed, µs
	relayAt  atomic.Int64     // when it was observed, unix ns; 0: never

	mu       sync.Mutex
	limiters []*Limiter
	verdict  atomic.Int64 // the last Verdict, for the metric
	down     bool         // the last board call failed; owned by Run
}

// New returns a controller on rdb.
func New(cfg Config, rdb *redis.Client, log *zap.Logger) (*Controller, error) {
	if rdb == nil || log == nil {
		return nil, errors.New("adapt: redis client and logger are required")
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.Prefix = cmp.Or(cfg.Prefix, "herald:")
	cfg.Targets = cfg.Targets.withDefaults()
	if cfg.Interval < 0 || cfg.Targets.HighLatency < 0 || cfg.Targets.RelayLag < 0 || cfg.Targets.Tolerance < 0 {
		return nil, fmt.Errorf("adapt config: interval %v, targets %v / %v, tolerance %v: must not be negative",
			cfg.Interval, cfg.Targets.HighLatency, cfg.Targets.RelayLag, cfg.Targets.Tolerance)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	c := &Controller{cfg: cfg, board: NewBoard(rdb, cfg.Prefix, freshIntervals*cfg.Interval),
		reporter: hex.EncodeToString(b), log: log.With(zap.String("component", "adapt")), calm: newCalm(), now: time.Now}
	if err := c.observeMetrics(); err != nil {
		return nil, err
	}
	return c, nil
}

// Limiter returns a new limiter with ceiling, stepped by c from now on. On a nil controller
// it returns a limiter that stays at its ceiling.
func (c *Controller) Limiter(name string, ceiling int) *Limiter {
	l := NewLimiter(name, ceiling)
	if c != nil {
		c.mu.Lock()
		c.limiters = append(c.limiters, l)
		c.mu.Unlock()
	}
	return l
}

// ObserveHigh records one HIGH delivery's accept → provider call latency.
func (c *Controller) ObserveHigh(d time.Duration) {
	if c != nil {
		c.high.add(d)
	}
}

// ObserveRelayLag records the relay's current lag: how long the transaction it just decoded
// waited since its commit.
func (c *Controller) ObserveRelayLag(d time.Duration) {
	if c != nil {
		c.relayLag.Store(d.Microseconds())
		c.relayAt.Store(time.Now().UnixNano())
	}
}

// Run reports and steps every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	for sleep.For(ctx, c.cfg.Interval) == nil {
		c.Tick(ctx)
	}
	return nil
}

// Tick is one round, what Run does every Interval: report, read, step. A failed Redis call steps every limiter Unknown,
// back to its ceiling: without the shared signal the configured limits apply.
func (c *Controller) Tick(ctx context.Context) {
	err := c.report(ctx)
	var s Signal
	if err == nil {
		s, err = c.board.Read(ctx)
	}
	v := Unknown
	if err == nil {
		now := c.now()
		if s.HighReports > 0 {
			c.calm.add(s.HighLatency, now)
		}
		v = c.cfg.Targets.JudgeCalm(s, c.calm.latency(now))
	}
	c.health(ctx, err)
	c.step(v)
}

// report writes this process's HIGH quantile and relay lag, those it has.
func (c *Controller) report(ctx context.Context) error {
	if q, ok := c.high.take(); ok {
		if err := c.board.ReportHigh(ctx, c.reporter, q); err != nil {
			return err
		}
	}
	if at := c.relayAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < c.board.fresh {
		return c.board.ReportRelayLag(ctx, c.reporter, time.Duration(c.relayLag.Load())*time.Microsecond)
	}
	return nil
}

// health logs the board going unreachable and coming back, once each.
func (c *Controller) health(ctx context.Context, err error) {
	switch {
	case err != nil && !c.down && ctx.Err() == nil:
		c.log.Warn("adaptive signal unavailable: limits at their ceilings", zap.Error(err))
		c.down = true
	case err == nil && c.down:
		c.log.Info("adaptive signal available again")
		c.down = false
	}
}

// step moves every limiter by v.
func (c *Controller) step(v Verdict) {
	c.verdict.Store(int64(v))
	c.mu.Lock()
	ls := c.limiters
	c.mu.Unlock()
	for _, l := range ls {
		l.Step(v)
	}
}

// observeMetrics registers herald.adapt.limit (each limiter's current limit) and
// herald.adapt.congested (1 while the last signal said HIGH was congested).
func (c *Controller) observeMetrics() error {
	m := otel.Meter("github.com/heraldhq/herald/internal/adapt")
	limit, err := m.Int64ObservableGauge("herald.adapt.limit",
		metric.WithDescription("Current adaptive limit of background work, by limiter (dispatch.normal, dispatch.low: "+
			"deliveries processed at once; expander, redrive: deliveries written per second); the configured value is its ceiling."))
	if err != nil {
		return fmt.Errorf("adapt metrics: %w", err)
	}
	ceiling, err := m.Int64ObservableGauge("herald.adapt.ceiling",
		metric.WithDescription("Configured ceiling of each adaptive limit, by limiter."))
	if err != nil {
		return fmt.Errorf("adapt metrics: %w", err)
	}
	verdict, err := m.Int64ObservableGauge("herald.adapt.signal",
		metric.WithDescription("What the last shared signal said: 0 unknown (no report or Redis unreachable: ceilings), 1 clear, 2 congested."))
	if err != nil {
		return fmt.Errorf("adapt metrics: %w", err)
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, l := range c.limiters {
			attrs := metric.WithAttributes(attribute.String("limiter", l.Name()))
			o.ObserveInt64(limit, int64(l.Limit()), attrs)
			o.ObserveInt64(ceiling, int64(l.Ceiling()), attrs)
		}
		o.ObserveInt64(verdict, c.verdict.Load())
		return nil
	}, limit, ceiling, verdict)
	if err != nil {
		return fmt.Errorf("adapt metrics: %w", err)
	}
	return nil
}
