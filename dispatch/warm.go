package dispatch

import (
	"context"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/pgpool"
)

// warm opens, before dispatch reports ready, the connections that the first HIGH deliveries
// after a start would otherwise open on their path: one database connection per HIGH worker
// (pgpool.Warm) and the Redis client's first connection. The pool keeps them idle for later. A process that does not run the HIGH lane
// opens nothing. Failures are logged and readiness goes on: Ready still pings the pool.
func (d *Dispatcher) warm(ctx context.Context) {
	defer d.warmed.Store(true)
	l, ok := d.lanes[herald.PriorityHigh]
	if !ok {
		return
	}
	if err := pgpool.Warm(ctx, d.pool, l.cfg.Concurrency); err != nil {
		d.log.Warn("warm up: database connection", zap.Error(err))
	}
	if err := d.leases.rdb.Ping(ctx).Err(); err != nil {
		d.log.Warn("warm up: redis", zap.Error(err))
	}
}
