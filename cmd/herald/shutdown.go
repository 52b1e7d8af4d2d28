package main

import (
	"context"
	"errors"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// A shutdown ends within --shutdown-timeout, whatever is in flight. Once it begins (a signal,
// or a component that failed), in-flight work has drainTimeout to finish: HTTP requests, a
// dispatch lane's provider calls. Past that, it is cut off (request contexts cancelled,
// deliveries left to the reaper) and the rest of the timeout is for commits, closing
// connections and flushing telemetry. Should the process still be running when the whole
// timeout has passed (a stuck call that ignores its context, a pool waiting for a
// connection that is never released), the watchdog logs what is still running and exits
// non-zero.

// errAbandoned marks an error that says in-flight work was cut off by the shutdown deadline.
var errAbandoned = errors.New("work abandoned at the shutdown deadline")

// drainTimeout is the part of the shutdown timeout in-flight work may take; the rest, a
// quarter but at most 3 s, is kept for commits, closes and flushes.
func drainTimeout(timeout time.Duration) time.Duration {
	return timeout - min(timeout/4, 3*time.Second)
}

// watchdog exits the process when a shutdown outlives its timeout.
type watchdog struct {
	log     *zap.Logger
	timeout time.Duration
	exit    func(code int)

	mu      sync.Mutex
	running []string      // parts of the process still running
	done    chan struct{} // closed by finish
	stopped chan struct{} // closed when the watching goroutine returns; nil before start
}

func newWatchdog(log *zap.Logger, timeout time.Duration) *watchdog {
	return &watchdog{log: log, timeout: timeout, exit: os.Exit, done: make(chan struct{})}
}

// track marks part as running until the returned function is called.
func (w *watchdog) track(part string) func() {
	w.mu.Lock()
	w.running = append(w.running, part)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if i := slices.Index(w.running, part); i >= 0 {
			w.running = slices.Delete(w.running, i, i+1)
		}
	}
}

// start watches, in a goroutine finish waits for: once ctx ends, the process has the
// timeout to finish; then the watchdog logs what was abandoned and exits with status 1.
func (w *watchdog) start(ctx context.Context) {
	w.stopped = make(chan struct{})
	go func() {
		defer close(w.stopped)
		w.watch(ctx)
	}()
}

func (w *watchdog) watch(ctx context.Context) {
	select {
	case <-w.done:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(w.timeout)
	defer t.Stop()
	select {
	case <-w.done:
		return
	case <-t.C:
	}
	w.mu.Lock()
	running := slices.Clone(w.running)
	w.mu.Unlock()
	w.log.Error("shutdown timeout passed: exiting, abandoning what is still running",
		zap.Duration("shutdown_timeout", w.timeout), zap.Strings("abandoned", running))
	_ = w.log.Sync()
	// Where what was abandoned waits, as Go's SIGQUIT would print it (grouped by stack).
	_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	w.exit(1)
}

// finish tells the watchdog that the process has finished, and waits for it to return.
func (w *watchdog) finish() {
	close(w.done)
	if w.stopped != nil {
		<-w.stopped
	}
}
