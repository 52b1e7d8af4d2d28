package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/sleep"
	"github.com/heraldhq/herald/senders"
)

// Call is one call a MemorySender received.
type Call struct {
	Message senders.Message
	// At is when Send was entered.
	At time.Time
}

// MemorySender is an in-memory Sender for tests and benchmarks. It records every call with
// its time and answers with what Behave returns (success by default), after Latency.
type MemorySender struct {
	// ProviderName is what Provider returns. Default "memory".
	ProviderName string
	// Latency is how long each call takes; the call ends early when its context ends.
	Latency time.Duration
	// Behave decides a call's result; call is the 1-based number of calls so far for the same
	// delivery. Nil means success. It may block (for example on a channel) to hold a call.
	Behave func(ctx context.Context, m *senders.Message, call int) (senders.Result, error)
	// OnCall, when set, is called at the start of every call, before Behave.
	OnCall func(m *senders.Message)

	mu      sync.Mutex
	calls   []Call
	perID   map[string]int
	changed chan struct{}
}

// Provider implements Sender.
func (s *MemorySender) Provider() string {
	if s.ProviderName == "" {
		return "memory"
	}
	return s.ProviderName
}

// Send implements Sender.
func (s *MemorySender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	at := time.Now()
	s.mu.Lock()
	if s.perID == nil {
		s.perID = make(map[string]int)
	}
	s.perID[m.DeliveryID]++
	n := s.perID[m.DeliveryID]
	s.calls = append(s.calls, Call{Message: *m, At: at})
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
	if s.OnCall != nil {
		s.OnCall(m)
	}
	if err := sleep.For(ctx, s.Latency); s.Latency > 0 && err != nil {
		return senders.Result{}, senders.AmbiguousError("TIMEOUT", err)
	}
	if s.Behave != nil {
		return s.Behave(ctx, m, n)
	}
	return senders.Result{Provider: s.Provider(), ProviderMessageID: "mem-" + m.DeliveryID, Code: "200"}, nil
}

// Calls returns a copy of every call so far, in order.
func (s *MemorySender) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount returns how many times id was sent.
func (s *MemorySender) CallCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perID[id]
}

// Changed returns a channel closed at the next call.
func (s *MemorySender) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}
