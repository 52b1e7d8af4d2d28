// Package sleep waits for a duration or for a context, whichever ends first: the one
// context-aware sleep of herald (as river's CancellableSleep), instead of a timer and a select
// written out at each wait.
package sleep

import (
	"context"
	"time"
)

// For waits d, or until ctx ends. It returns ctx.Err() when ctx ended first (or had ended),
// nil when d passed. A d of zero or less returns at once (ctx.Err() if ctx has ended).
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Until is For(ctx, time.Until(t)).
func Until(ctx context.Context, t time.Time) error { return For(ctx, time.Until(t)) }
