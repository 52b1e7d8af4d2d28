package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// observe registers dispatch's observed gauges and starts measuring each lane's consumer
// lag; the returned stop ends the measuring, waits for it and unregisters the gauges.
//
//   - herald.dispatch.redis.degraded: 1 while Redis is unreachable and dispatch runs in
//     degraded mode (database claim only, per-process rate limits).
//   - herald.dispatch.consumer_lag_records: per lane, the records of its topic its consumer
//     group has not committed yet (kadm's group lag), read every Config.LagInterval. Every
//     dispatch process reports its group's lag: aggregate with max, not sum.
func (d *Dispatcher) observe(ctx context.Context) (stop func(), err error) {
	meter := otel.Meter(instrumentation)
	degraded, err := meter.Int64ObservableGauge("herald.dispatch.redis.degraded",
		metric.WithDescription("1 while Redis is unreachable and dispatch runs in degraded mode."))
	if err != nil {
		return nil, err
	}
	lagGauge, err := meter.Int64ObservableGauge("herald.dispatch.consumer_lag_records",
		metric.WithDescription("Records of a lane's topic its consumer group has not committed, by priority (read every LagInterval)."))
	if err != nil {
		return nil, err
	}
	lags := make(map[herald.Priority]*atomic.Int64, len(d.lanes))
	for p := range d.lanes {
		lags[p] = new(atomic.Int64)
		lags[p].Store(-1) // unknown until read
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var v int64
		if !d.leases.health.down().IsZero() {
			v = 1
		}
		o.ObserveInt64(degraded, v)
		for p, lag := range lags {
			if n := lag.Load(); n >= 0 {
				o.ObserveInt64(lagGauge, n, metric.WithAttributes(attribute.String("priority", string(p))))
			}
		}
		return nil
	}, degraded, lagGauge)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.measureLag(ctx, lags)
	}()
	return func() {
		cancel()
		wg.Wait()
		_ = reg.Unregister()
	}, nil
}

// measureLag reads every lane's group lag now and every LagInterval until ctx ends. A read
// that fails leaves the last value in place and is logged at debug level: Kafka outages are
// reported by the lanes.
func (d *Dispatcher) measureLag(ctx context.Context, lags map[herald.Priority]*atomic.Int64) {
	t := time.NewTicker(d.cfg.LagInterval)
	defer t.Stop()
	for {
		for p, l := range d.lanes {
			rctx, cancel := context.WithTimeout(ctx, d.cfg.LagInterval)
			described, err := kadm.NewClient(l.cl).Lag(rctx, l.cfg.Group)
			cancel()
			if err == nil {
				g, ok := described[l.cfg.Group]
				if err = g.Error(); ok && err == nil {
					lags[p].Store(g.Lag.Total())
				}
			}
			if err != nil && ctx.Err() == nil {
				d.log.Debug("read consumer lag", zap.String("lane", string(p)), zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
