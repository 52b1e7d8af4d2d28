package events

import (
	"context"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/endpoint"
	"github.com/heraldhq/herald/internal/sleep"
)

// sweepBatch is how many messages one sweep statement claims.
const sweepBatch = 500

// sweep claims due messages every SweepInterval: retries whose time came, replays, messages
// handed back, and the claims of a process that died. A full batch is followed by another at
// once.
func (r *Role) sweep(ctx context.Context) error {
	for {
		msgs, err := endpoint.ClaimDue(ctx, r.pool, sweepBatch, r.cfg.Lease)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("sweep", zap.Error(err))
		}
		for _, m := range msgs {
			r.queues.hand(m)
		}
		if len(msgs) == sweepBatch {
			continue
		}
		if err := sleep.For(ctx, r.cfg.SweepInterval); err != nil {
			return err
		}
	}
}

// watchHealth reads the failing endpoints every HealthInterval for the failing-since gauge.
func (r *Role) watchHealth(ctx context.Context) error {
	for {
		f, err := endpoint.Failing(ctx, r.pool)
		if err == nil {
			r.metrics.setFailing(f)
		} else if ctx.Err() == nil {
			r.log.Warn("read failing endpoints", zap.Error(err))
		}
		if err := sleep.For(ctx, r.cfg.HealthInterval); err != nil {
			return err
		}
	}
}
