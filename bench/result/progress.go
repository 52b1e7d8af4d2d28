package result

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Progress prints one line every interval while a long phase runs: what line() returns,
// prefixed with the scenario and the time since start. It returns when ctx ends.
//
//	stop := result.Progress(ctx, os.Stderr, "relay", 5*time.Second, func() string {
//		return fmt.Sprintf("%d inserted, %d published", ins.Load(), pub.Load())
//	})
//	defer stop()
func Progress(ctx context.Context, w io.Writer, scenario string, interval time.Duration, line func() string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Fprintf(w, "[%s %5.0fs] %s\n", scenario, time.Since(start).Seconds(), line())
			}
		}
	}()
	return func() { cancel(); <-done }
}
