// Package heraldtest holds the test helpers every package's tests share (as river's
// riversharedtest): polling a condition with a deadline instead of sleeping, a free loopback
// address, failing on an error. Helpers that need a service (a database, topics, a Redis
// prefix) are in internal/stacktest.
package heraldtest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
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
// right now, for a listener the test starts. The port comes from 20000–29999, below Linux's
// ephemeral range (32768–60999), from which every ":0" listener and every outgoing
// connection takes its port: a port picked there and closed was handed, before the test's
// process bound it, to the next ":0" listener (the provider simulator's), and the process
// failed with "address already in use". A process never hands out one port twice.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	for range 1000 {
		port := freeAddrLow + rand.IntN(freeAddrCount)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		Must(tb, l.Close())
		return addr
	}
	tb.Fatalf("no free port in %d–%d", freeAddrLow, freeAddrLow+freeAddrCount-1)
	return ""
}

const freeAddrLow, freeAddrCount = 20000, 10000

// handedOut are the ports FreeAddr returned in this process.
var handedOut sync.Map

// Must fails the test at once when err is not nil.
func Must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
