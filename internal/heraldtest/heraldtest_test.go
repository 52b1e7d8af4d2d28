package heraldtest

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitFor(t *testing.T) {
	var n atomic.Int32
	WaitFor(t, time.Minute, "the third check", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("%d checks", n.Load())
	}
}

// A condition that never holds fails the test with what it waited for.
func TestWaitForFails(t *testing.T) {
	ft := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }() // fakeTB.Fatalf stops the goroutine by panicking
		WaitForEvery(ft, 30*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	if ft.msg != "timed out after 30ms waiting for never" {
		t.Fatalf("failure %q", ft.msg)
	}
}

func TestFreeAddr(t *testing.T) {
	l, err := net.Listen("tcp", FreeAddr(t))
	Must(t, err)
	Must(t, l.Close())
}

type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = sprintf(format, args...)
	panic("fatal")
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
