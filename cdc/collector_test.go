package cdc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
)

// received is what the collector keeps of one delivery's records.
type received struct {
	count     int
	topic     string
	partition int32     // of the first record
	offset    int64     // of the first record
	first     time.Time // when the first record was polled
	msg       herald.DeliveryMessage
	headers   map[string]string
}

// collector consumes the test's topics from the start (no group) and records every delivery
// record by delivery id.
type collector struct {
	t    testing.TB
	cl   *kgo.Client
	mu   sync.Mutex
	byID map[string]*received
	bad  []string // records that do not follow the contract
	wg   sync.WaitGroup
}

func newCollector(t testing.TB, brokers []string, topics map[herald.Priority]string) *collector {
	t.Helper()
	names := make([]string, 0, len(topics))
	for _, n := range topics {
		names = append(names, n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond))
	require.NoError(t, err)
	c := &collector{t: t, cl: cl, byID: map[string]*received{}}
	ctx, cancel := context.WithCancel(context.Background())
	c.wg.Go(func() { c.run(ctx) })
	t.Cleanup(func() {
		cancel()
		c.wg.Wait()
		cl.Close()
	})
	return c
}

func (c *collector) run(ctx context.Context) {
	for {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		now := time.Now()
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.t.Logf("fetch %s/%d: %v", topic, p, err)
			}
		})
		c.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			id := string(r.Key)
			msg, err := herald.UnmarshalDeliveryMessage(r.Value)
			headers := map[string]string{}
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			if err != nil || msg.DeliveryID != id || headers[herald.HeaderDeliveryID] != id {
				c.bad = append(c.bad, id)
			}
			rc := c.byID[id]
			if rc == nil {
				rc = &received{topic: r.Topic, partition: r.Partition, offset: r.Offset, first: now, msg: msg, headers: headers}
				c.byID[id] = rc
			}
			rc.count++
		})
		c.mu.Unlock()
	}
}

func (c *collector) get(id string) (received, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byID[id]
	if !ok {
		return received{}, false
	}
	return *r, true
}

// missing returns how many of ids have no record yet.
func (c *collector) missing(ids []string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, id := range ids {
		if c.byID[id] == nil {
			n++
		}
	}
	return n
}

// duplicates returns how many records beyond the first arrived for ids.
func (c *collector) duplicates(ids []string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, id := range ids {
		if r := c.byID[id]; r != nil {
			n += r.count - 1
		}
	}
	return n
}

func (c *collector) malformed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

// waitAll waits until every id has at least one record; on failure it tells in which state
// the missing rows are.
func (h *harness) waitAll(ids []string, timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for h.records.missing(ids) > 0 {
		if time.Now().After(deadline) {
			var missing []string
			for _, id := range ids {
				if _, ok := h.records.get(id); !ok {
					missing = append(missing, id)
				}
			}
			var states string
			_ = h.pool.QueryRow(context.Background(), `SELECT string_agg(status || ':' || n, ' ') FROM
				(SELECT status, count(*) n FROM delivery WHERE id::text = ANY($1) GROUP BY status) s`, missing).Scan(&states)
			h.t.Fatalf("after %v: %d of %d deliveries never reached Kafka (their states: %s; slot confirmed at %d, WAL at %d)",
				timeout, len(missing), len(ids), states, h.confirmedFlush(), h.currentWAL())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
