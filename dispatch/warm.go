package dispatch

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// warm opens, before dispatch reports ready, the connections that the first HIGH deliveries
// after a start would otherwise open on their path: one database connection per HIGH worker
// (pgxpool opens them on demand, and a connection's start-up — TCP, authentication, the
// session settings — is tens of milliseconds on a busy machine) and the Redis client's first
// connection. The pool keeps them idle for later. A process that does not run the HIGH lane
// opens nothing. Failures are logged and readiness goes on: Ready still pings the pool.
func (d *Dispatcher) warm(ctx context.Context) {
	defer d.warmed.Store(true)
	l, ok := d.lanes[herald.PriorityHigh]
	if !ok {
		return
	}
	n := min(l.cfg.Concurrency, int(d.pool.Config().MaxConns))
	conns := make(chan *pgxpool.Conn, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c, err := d.pool.Acquire(ctx)
			if err != nil {
				d.log.Warn("warm up: database connection", zap.Error(err))
				return
			}
			conns <- c
		})
	}
	wg.Wait()
	close(conns)
	for c := range conns {
		c.Release()
	}
	if err := d.leases.rdb.Ping(ctx).Err(); err != nil {
		d.log.Warn("warm up: redis", zap.Error(err))
	}
}
