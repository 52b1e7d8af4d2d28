package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
)

// Cancelling Run while a provider call is in flight: the call finishes (it is not cut off),
// its outcome is recorded, the offset is committed, and Run returns nil.
func TestGracefulShutdownFinishesInFlightAndCommits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	id, cancel, done := runUntilCalled(t, e, cfg, &MemorySender{Latency: 500 * time.Millisecond})
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	st, _ := e.state(id)
	require.Equal(t, herald.StatusSent, st, "the in-flight send finished and was recorded")

	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer acancel()
	group := cfg.Lanes[herald.PriorityHigh].Group
	committed, err := adm.FetchOffsets(actx, group)
	require.NoError(t, err)
	ends, err := adm.ListEndOffsets(actx, e.topics[herald.PriorityHigh])
	require.NoError(t, err)
	var produced, covered int64
	ends.Each(func(o kadm.ListedOffset) {
		produced += o.Offset
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok {
			covered += c.At
		}
	})
	require.Equal(t, int64(1), produced)
	require.Equal(t, produced, covered, "the processed record's offset was committed before leaving")
}

// Cancelling Run while a provider call outlasts ShutdownTimeout: the call is cancelled, its
// offset stays uncommitted, and Run returns ErrAbandoned (herald serve then exits non-zero
// and logs what it abandoned) within the timeout, not when the call would have ended.
func TestShutdownCutOffReturnsErrAbandoned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.ShutdownTimeout = 500 * time.Millisecond
	_, cancel, done := runUntilCalled(t, e, cfg, &MemorySender{Latency: time.Minute})
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrAbandoned)
		require.Less(t, time.Since(stopped), 30*time.Second, "Run waited for the call instead of its shutdown timeout")
	case <-time.After(45 * time.Second):
		t.Fatal("Run did not return after its shutdown timeout")
	}
}

// runUntilCalled runs a dispatcher with cfg and s, publishes one SMS delivery and returns
// once s was called for it: the delivery id, the cancel of Run's context and Run's result.
func runUntilCalled(t *testing.T, e *env, cfg Config, s *MemorySender) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	d, err := New(cfg, e.pool, e.rdb, smsOnly(s), zaptest.NewLogger(t))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	called := s.Changed()
	id := e.insert(fixture{})
	e.publish(id)
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatal("sender never called")
	}
	return id, cancel, done
}
