package main

import (
	"context"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heraldhq/herald/internal/heraldtest"
)

// TestShutdownEndsWithinTimeout holds a POST in flight (its read waits on a table lock that a
// test transaction keeps) and stops herald: the process ends within --shutdown-timeout and a
// small margin, exits non-zero, and one log line says what it abandoned.
func TestShutdownEndsWithinTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	st := newStack(t)
	sm := startSim(t)
	addr := heraldtest.FreeAddr(t)
	key := st.apiKey(t)
	p := st.serve(t, "serve", addr, sm, "--roles", "ingest", "--shutdown-timeout", timeout.String())

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, st.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) }) // runs before the process is stopped: releases the lock
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE notification IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	posted := make(chan struct{})
	go func() {
		defer close(posted)
		_, _, _ = tryJSON(ctx, http.MethodPost, "http://"+addr+"/api/notifications", key, "stuck",
			`{"userId": 1, "template": "otp", "channels": ["SMS"]}`)
	}()
	heraldtest.WaitFor(t, 20*time.Second, "the POST to wait on the lock", func() bool {
		var waiting int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`).Scan(&waiting)
		require.NoError(t, err)
		return waiting > 0
	})

	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(timeout + 2*time.Second):
		t.Fatalf("herald still running %v after SIGTERM (--shutdown-timeout %v)", time.Since(start), timeout)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start))
	require.NotZero(t, p.cmd.ProcessState.ExitCode(), "work was abandoned: the exit status says so")
	log, err := os.ReadFile(p.log)
	require.NoError(t, err)
	require.Regexp(t, `"msg":"shutdown abandoned work".*in-flight requests cut off: 1|"msg":"shutdown timeout passed`, string(log))
	<-posted
	require.NoError(t, tx.Rollback(ctx))
}

// TestWatchdogExitsWhenShutdownOutlivesTimeout: a part that never returns (here, one that
// is tracked and never untracked) makes the watchdog log it and exit with status 1.
func TestWatchdogExitsWhenShutdownOutlivesTimeout(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	w := newWatchdog(zap.New(core), 50*time.Millisecond)
	exited := make(chan int, 1)
	w.exit = func(code int) { exited <- code }
	done := w.track("http requests")
	defer done()
	w.track("dispatch")()
	ctx, cancel := context.WithCancel(context.Background())
	w.start(ctx)
	cancel()
	select {
	case code := <-exited:
		require.Equal(t, 1, code)
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not exit")
	}
	w.finish()
	entries := logs.FilterMessage("shutdown timeout passed: exiting, abandoning what is still running").All()
	require.Len(t, entries, 1)
	require.Equal(t, []any{"http requests"}, entries[0].ContextMap()["abandoned"])

	// A process that finishes in time is not exited.
	w = newWatchdog(zap.NewNop(), time.Hour)
	w.exit = func(int) { t.Error("exited") }
	ctx, cancel = context.WithCancel(context.Background())
	w.start(ctx)
	cancel()
	w.finish()
}
