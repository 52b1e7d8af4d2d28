package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders"
)

// highCalls follows the HIGH OTPs of a scenario: when each POST was due and when its
// delivery's first provider call came, counting every other call as LOW traffic.
type highCalls struct {
	mu     sync.Mutex
	due    map[string]time.Time // HIGH delivery id → when its POST was due
	called map[string]time.Time // HIGH delivery id → its first provider call
	high   atomic.Int64         // HIGH deliveries called
	low    atomic.Int64         // calls of every other priority
}

// watchHigh installs a highCalls on the stack's sender and warms the HIGH path up: the first
// call to a provider account waits one rate-limit window (the limiter's guard,
// dispatch/rate_limit.go), which a running herald has long paid. The warm-up is forgotten.
func watchHigh(ctx context.Context, b *testing.B, s *stack) *highCalls {
	b.Helper()
	h := &highCalls{due: map[string]time.Time{}, called: map[string]time.Time{}}
	s.onCall(func(m *senders.Message, now time.Time) {
		if m.Priority != herald.PriorityHigh {
			h.low.Add(1)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.called[m.DeliveryID]; !ok {
			h.called[m.DeliveryID] = now
			h.high.Add(1)
		}
	})
	for i := range 5 {
		if _, why := s.postNotification(ctx, fmt.Sprintf("warm-%d", i), herald.PriorityHigh, nil); why != "" {
			b.Fatalf("warm-up POST: %s", why)
		}
	}
	heraldtest.WaitFor(b, time.Minute, "the warm-up HIGH sent", func() bool { return h.high.Load() >= 5 })
	h.mu.Lock()
	clear(h.called)
	h.high.Store(0)
	h.mu.Unlock()
	return h
}

// posted notes that HIGH delivery id's POST was due at.
func (h *highCalls) posted(id string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.due[id] = at
}

// allCalled says whether every posted HIGH delivery has had its provider call.
func (h *highCalls) allCalled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.called) >= len(h.due)
}

// giveUp counts every posted HIGH delivery not called yet as called at, a lower bound of its
// latency, and returns how many there were.
func (h *highCalls) giveUp(at time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for id := range h.due {
		if _, ok := h.called[id]; !ok {
			h.called[id] = at
			n++
		}
	}
	return n
}

// latencies records into hist, and into each of also, the due → called latency of every HIGH
// POST due in [from, to).
func (h *highCalls) latencies(hist *hdrhistogram.Histogram, from, to time.Time, also ...func(due time.Time, d time.Duration)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, at := range h.due {
		if !at.Before(from) && at.Before(to) {
			record(hist, h.called[id].Sub(at))
			for _, f := range also {
				f(at, h.called[id].Sub(at))
			}
		}
	}
}
