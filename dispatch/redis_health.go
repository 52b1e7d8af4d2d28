package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
)

// redisHealth is a small circuit breaker shared by the rate limiter and the lease. After a
// Redis failure, callers skip Redis for retryEvery and run in degraded mode; the first call
// after that probes Redis again. It logs each transition once, not each failed call.
type redisHealth struct {
	retryEvery time.Duration
	log        *zap.Logger

	mu        sync.Mutex
	downSince time.Time // zero while Redis answers
	nextProbe time.Time
}

// usable reports whether a caller should try Redis now.
func (h *redisHealth) usable(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.downSince.IsZero() || !now.Before(h.nextProbe)
}

// down returns when the current outage began, or zero.
func (h *redisHealth) down() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.downSince
}

// observe records the result of a Redis call. It returns true when err means Redis is
// unusable (the caller's own cancellation does not count).
func (h *redisHealth) observe(ctx context.Context, err error, now time.Time) bool {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		if !h.downSince.IsZero() {
			h.log.Info("redis reachable again: leaving degraded mode",
				zap.Duration("outage", now.Sub(h.downSince)))
			h.downSince = time.Time{}
		}
		return false
	}
	if h.downSince.IsZero() {
		h.downSince = now
		h.log.Warn("redis unreachable: degraded mode (database claim only, per-process rate limits)", zap.Error(err))
	}
	h.nextProbe = now.Add(h.retryEvery)
	return true
}
