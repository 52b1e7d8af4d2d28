package events

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/endpoint"
)

// deliver makes one attempt of m and records it. claimed is when this process claimed m: a
// message that waited in its queue for half its lease has its claim renewed first, and is
// skipped when the claim was lost meanwhile.
func (r *Role) deliver(ctx context.Context, m endpoint.Message, claimed time.Time) {
	if time.Since(claimed) > r.cfg.Lease/2 {
		ok, err := endpoint.Extend(ctx, r.pool, m, r.cfg.Lease)
		if err != nil || !ok {
			if err != nil {
				r.log.Warn("renew claim", logFields(m, err)...)
			}
			return
		}
	}
	a := r.post(ctx, m)
	result, next := r.verdict(m, a)
	o := endpoint.Outcome{StatusCode: a.status, Error: describe(a), Duration: a.took, NextAttemptAt: next}
	// The outcome is recorded even when the process is stopping: the POST happened.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.record(wctx, m, result, o); err != nil {
		r.log.Error("record webhook attempt", logFields(m, err)...)
		return
	}
	if err := endpoint.SetFailing(wctx, r.pool, m.EndpointID, result != endpoint.ResultDelivered); err != nil {
		r.log.Warn("record endpoint health", logFields(m, err)...)
	}
}

// record carries out the transition of result.
func (r *Role) record(ctx context.Context, m endpoint.Message, result endpoint.Result, o endpoint.Outcome) error {
	var moved bool
	var err error
	switch result {
	case endpoint.ResultDelivered:
		moved, err = endpoint.Deliver(ctx, r.pool, m, o)
	case endpoint.ResultRetry:
		moved, err = endpoint.Retry(ctx, r.pool, m, o)
	case endpoint.ResultDropped:
		moved, err = endpoint.Drop(ctx, r.pool, m, o)
	case endpoint.ResultGone:
		if moved, err = endpoint.Gone(ctx, r.pool, m, o); err == nil {
			var disabled bool
			if disabled, err = endpoint.Disable(ctx, r.pool, m.EndpointID); disabled {
				r.metrics.disabled.Add(ctx, 1)
				r.log.Warn("webhook endpoint disabled: it answered 410 Gone", zap.String("endpoint_id", m.EndpointID))
			}
		}
	}
	if err != nil {
		return err
	}
	if moved {
		r.metrics.outcome(ctx, result, m)
	}
	if result == endpoint.ResultDropped && moved {
		r.log.Info("webhook message dropped", zap.String("endpoint_id", m.EndpointID), zap.String("event_id", m.EventID),
			zap.Int("attempt", m.Attempts+1), zap.String("reason", o.Error))
	}
	return nil
}

func logFields(m endpoint.Message, err error) []zap.Field {
	return []zap.Field{zap.String("endpoint_id", m.EndpointID), zap.String("event_id", m.EventID), zap.Error(err)}
}
