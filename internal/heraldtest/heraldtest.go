// Package heraldtest holds the test helpers every package's tests share (as river's
// riversharedtest): polling a condition with a deadline instead of sleeping, a free loopback
// address, failing on an error. Helpers that need a service (a database, topics, a Redis
// prefix) are in internal/stacktest.
package heraldtest

import (
	"net"
	"testing"
	"time"
)

// PollInterval is how often WaitFor checks its condition.
const PollInterval = 20 * time.Millisecond

// WaitFor polls cond every PollInterval until it holds, and fails the test when timeout has
// passed first; what names the awaited condition in the failure.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	WaitForEvery(tb, timeout, PollInterval, what, cond)
}

// WaitForEvery is WaitFor polling every every.
func WaitForEvery(tb testing.TB, timeout, every time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(every) // polling a condition with a deadline
	}
}

// FreeAddr returns a loopback address ("127.0.0.1:port") with a port nothing listens on
// right now, for a listener the test starts.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Must(tb, err)
	addr := l.Addr().String()
	Must(tb, l.Close())
	return addr
}

// Must fails the test at once when err is not nil.
func Must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
