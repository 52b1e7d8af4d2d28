package dispatch

import (
	"context"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/adapt"
)

// laneLimit is the adaptive limit of a NORMAL or LOW lane, with the lane's Concurrency as its
// ceiling; HIGH is never limited (nil).
func laneLimit(c *adapt.Controller, p herald.Priority, concurrency int) *adapt.Limiter {
	if c == nil || p == herald.PriorityHigh {
		return nil
	}
	return c.Limiter("dispatch."+strings.ToLower(string(p)), concurrency)
}

// followLimit keeps the lane's free worker slots at its adaptive limit: a goroutine holds
// Concurrency − Limit of the slots itself (parked tokens in w.sem, taken as workers free
// them, given back when the limit grows), so the lane's path stays the one it is with a fixed
// concurrency. The returned channel is closed once the goroutine has given every slot back
// after ctx ended. Without a limit it is closed at once.
func (l *lane) followLimit(ctx context.Context, w *workers) <-chan struct{} {
	done := make(chan struct{})
	if l.limit == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		parked := 0
		defer func() {
			for ; parked > 0; parked-- {
				<-w.sem
			}
		}()
		for {
			want := cap(w.sem) - l.limit.Limit()
			for ; parked > want; parked-- {
				<-w.sem // the parked tokens are in the channel: never blocks
			}
			var take chan struct{}
			if parked < want {
				take = w.sem
			}
			select {
			case take <- struct{}{}:
				parked++
			case <-l.limit.Changed():
			case <-ctx.Done():
				return
			}
		}
	}()
	return done
}
