package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// watcher is the consumer that decides when a row is visible: one client per topic, as
// dispatch has one per lane (dispatch/lane.go), each reading its topic from its end offsets
// at the time it starts (listed, not left to a reset policy, so that no record produced after
// the start is skipped); it keeps, per delivery id, when its first record was polled. One
// client over the three topics would make the broker read all 20 partitions for each fetch,
// where a lane's fetch reads its topic's.
type watcher struct {
	mu       sync.Mutex
	seen     map[string]time.Time
	dups     int
	bad      int // records that are not herald's message
	distinct atomic.Int64
	wg       sync.WaitGroup
}

func watch(tb testing.TB, brokers []string, topics map[herald.Priority]string) *watcher {
	tb.Helper()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	heraldtest.Must(tb, err)
	defer admCl.Close()
	names := make([]string, 0, len(topics))
	for _, t := range topics {
		names = append(names, t)
	}
	from := map[string]map[int32]kgo.Offset{} // topic → partition → end offset
	endOffsets(tb, admCl, names).Each(func(o kadm.ListedOffset) {
		if from[o.Topic] == nil {
			from[o.Topic] = map[int32]kgo.Offset{}
		}
		from[o.Topic][o.Partition] = kgo.NewOffset().At(o.Offset)
	})
	w := &watcher{seen: map[string]time.Time{}}
	runCtx, stop := context.WithCancel(context.Background())
	var clients []*kgo.Client
	tb.Cleanup(func() {
		stop()
		w.wg.Wait()
		for _, cl := range clients {
			cl.Close()
		}
	})
	for topic, parts := range from {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
			kgo.FetchMaxWait(100*time.Millisecond))
		heraldtest.Must(tb, err)
		clients = append(clients, cl)
		w.wg.Go(func() { w.run(runCtx, cl) })
	}
	return w
}

func (w *watcher) run(ctx context.Context, cl *kgo.Client) {
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		now := time.Now()
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				w.mu.Lock()
				w.bad++
				w.mu.Unlock()
			}
		})
		w.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			id := string(r.Key)
			if m, err := herald.UnmarshalDeliveryMessage(r.Value); err != nil || m.DeliveryID != id {
				w.bad++
				return
			}
			if _, ok := w.seen[id]; ok {
				w.dups++
				return
			}
			w.seen[id] = now
			w.distinct.Add(1)
		})
		w.mu.Unlock()
	}
}

// visible returns when the record of delivery id was first polled.
func (w *watcher) visible(id string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.seen[id]
	return at, ok
}

// count is how many distinct deliveries have been seen.
func (w *watcher) count() int { return int(w.distinct.Load()) }

// anomalies returns the duplicate records and the records that were not herald's message
// (or fetch errors) seen so far.
func (w *watcher) anomalies() (dups, bad int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dups, w.bad
}

// endOffsets lists the end offsets of topics, retrying while a topic just created is not yet
// hosted by its leader.
func endOffsets(tb testing.TB, cl *kgo.Client, topics []string) kadm.ListedOffsets {
	tb.Helper()
	var ends kadm.ListedOffsets
	var err error
	heraldtest.WaitFor(tb, 30*time.Second, "end offsets of the topics", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err = kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		return err == nil
	})
	return ends
}
