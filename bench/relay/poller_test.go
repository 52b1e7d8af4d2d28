package relay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// pollerEnv is a Poller's test slice of the stack: a database and one topic per priority.
type pollerEnv struct {
	t      *testing.T
	s      *system
	kcl    *kgo.Client
	poller *Poller
	spec   deliverytest.Spec
}

func newPollerEnv(t *testing.T, cfg PollerConfig) *pollerEnv {
	t.Helper()
	s := newSystem(t, "polling relay")
	require.NoError(t, InstallSeedIndex(context.Background(), s.pool))
	kcl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	cfg.Topics = s.topics
	p, err := NewPoller(cfg, s.pool, kcl, zaptest.NewLogger(t))
	require.NoError(t, err)
	return &pollerEnv{t: t, s: s, kcl: kcl, poller: p, spec: deliverytest.Spec{ClientID: s.clientID}}
}

func (e *pollerEnv) insert(p herald.Priority, dueIn time.Duration) string {
	s := e.spec
	s.Priority, s.DueIn = p, dueIn
	return deliverytest.One(e.t, e.s.pool, s)
}

func (e *pollerEnv) status(id string) herald.Status {
	var st string
	require.NoError(e.t, e.s.pool.QueryRow(context.Background(), `SELECT status FROM delivery WHERE id = $1`, id).Scan(&st))
	return herald.Status(st)
}

// records reads every record on the topics up to their current end offsets.
func (e *pollerEnv) records() []*kgo.Record {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := []string{e.s.topics[herald.PriorityHigh], e.s.topics[herald.PriorityNormal], e.s.topics[herald.PriorityLow]}
	ends := endOffsets(e.t, e.kcl, names)
	left := map[string]map[int32]int64{}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) {
		if left[o.Topic] == nil {
			left[o.Topic] = map[int32]int64{}
		}
		left[o.Topic][o.Partition] = o.Offset
		total += o.Offset
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.s.brokers...), kgo.ConsumeTopics(names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(e.t, err)
	defer cl.Close()
	var got []*kgo.Record
	for int64(len(got)) < total {
		fetches := cl.PollFetches(ctx)
		require.NoError(e.t, ctx.Err(), "read %d of %d records", len(got), total)
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	return got
}

// One poll is one transaction of at most Batch rows, highest priority first (HIGH, NORMAL,
// LOW, as the seed's SMALLINT orders them; the text names would put LOW before NORMAL), then
// oldest next_attempt_at: each due row is published once, as herald's record, and marked
// QUEUED; a row due later is left alone.
func TestPollerPublishesDueRowsOnceHighestPriorityFirst(t *testing.T) {
	e := newPollerEnv(t, PollerConfig{Batch: 1})
	ctx := context.Background()
	low := e.insert(herald.PriorityLow, 0) // due first
	normal := e.insert(herald.PriorityNormal, 0)
	high := e.insert(herald.PriorityHigh, 0)
	later := e.insert(herald.PriorityHigh, time.Hour)

	for _, want := range []string{high, normal, low} {
		n, err := e.poller.poll(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, herald.StatusQueued, e.status(want))
	}
	n, err := e.poller.poll(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing else is due")
	require.Equal(t, herald.StatusPending, e.status(later))

	recs := e.records()
	require.Len(t, recs, 3, "each due row once, the future one not")
	byID := map[string]*kgo.Record{}
	for _, r := range recs {
		byID[string(r.Key)] = r
	}
	for id, p := range map[string]herald.Priority{high: herald.PriorityHigh, normal: herald.PriorityNormal, low: herald.PriorityLow} {
		r := byID[id]
		require.NotNil(t, r, "record of the %s row", p)
		require.Equal(t, e.s.topics[p], r.Topic)
		m, err := herald.UnmarshalDeliveryMessage(r.Value)
		require.NoError(t, err)
		require.Equal(t, id, m.DeliveryID)
		require.Equal(t, p, m.Priority)
		require.Equal(t, herald.ChannelSMS, m.Channel)
		require.NotEmpty(t, m.NotificationID)
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		require.Equal(t, id, headers[herald.HeaderDeliveryID])
		require.Equal(t, "1", headers[herald.HeaderAttempt])
	}
}

// Run polls on its own: rows committed while it runs are published and marked QUEUED by a
// later poll, without anyone calling poll.
func TestPollerRunPublishesRowsCommittedWhileItRuns(t *testing.T) {
	e := newPollerEnv(t, PollerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.poller.Run(ctx) }()
	ids := []string{e.insert(herald.PriorityHigh, 0), e.insert(herald.PriorityLow, 0)}
	heraldtest.WaitFor(t, 30*time.Second, "rows QUEUED", func() bool {
		return e.status(ids[0]) == herald.StatusQueued && e.status(ids[1]) == herald.StatusQueued
	})
	cancel()
	require.NoError(t, <-done)
	require.Len(t, e.records(), 2)
}
