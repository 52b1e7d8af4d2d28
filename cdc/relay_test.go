package cdc

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

func TestRelayPublishesDuePendingRowsToTheirPriorityTopic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.startRelay(h.cfg)

	high := h.insert(rows{n: 5, priority: herald.PriorityHigh, traceparent: testTraceparent})
	normal := h.insert(rows{n: 5, priority: herald.PriorityNormal, attempts: 2})
	low := h.insert(rows{n: 5, priority: herald.PriorityLow})
	sent := h.insert(rows{n: 3, priority: herald.PriorityHigh, status: herald.StatusSent})
	queued := h.insert(rows{n: 3, priority: herald.PriorityHigh, status: herald.StatusQueued})
	future := h.insert(rows{n: 3, priority: herald.PriorityHigh, dueIn: time.Hour})
	// An UPDATE that makes a row PENDING and due publishes it too: a claim handed back.
	revived := h.insert(rows{n: 1, priority: herald.PriorityLow, status: herald.StatusSending, attempts: 1})
	ok, err := delivery.Unclaim(context.Background(), h.pool, revived[0], 1, 0)
	require.NoError(t, err)
	require.True(t, ok)
	// The last transaction: once its record is in, every earlier transaction was decided.
	last := h.insert(rows{n: 1, priority: herald.PriorityNormal})

	all := append(append(append(append(high, normal...), low...), revived...), last...)
	h.waitAll(all, 60*time.Second)
	for _, c := range []struct {
		ids      []string
		priority herald.Priority
	}{{high, herald.PriorityHigh}, {normal, herald.PriorityNormal}, {low, herald.PriorityLow}, {revived, herald.PriorityLow}} {
		for _, id := range c.ids {
			r, _ := h.records.get(id)
			require.Equal(t, h.cfg.Topics[c.priority], r.topic, "delivery %s", id)
			require.Equal(t, c.priority, r.msg.Priority)
			require.Equal(t, herald.ChannelSMS, r.msg.Channel)
			require.NotEmpty(t, r.msg.NotificationID)
			require.Equal(t, strconv.Itoa(r.msg.Attempts+1), r.headers[herald.HeaderAttempt])
		}
	}
	r, _ := h.records.get(normal[0])
	require.Equal(t, 2, r.msg.Attempts)
	r, _ = h.records.get(high[0])
	require.Contains(t, r.headers[herald.HeaderTraceparent], "4bf92f3577b34da6a3ce929d0e0e4736",
		"the record continues the row's trace")
	require.Empty(t, h.records.malformed())

	// Published rows end QUEUED; the others are untouched and have no record.
	for _, id := range all {
		eventually(t, 10*time.Second, func() bool { return h.status(id) == herald.StatusQueued }, "delivery %s not QUEUED but %s", id, h.status(id))
	}
	for _, id := range sent {
		require.Equal(t, herald.StatusSent, h.status(id))
	}
	for _, id := range future {
		require.Equal(t, herald.StatusPending, h.status(id))
	}
	require.Equal(t, len(sent)+len(queued)+len(future), h.records.missing(append(append(sent, queued...), future...)),
		"rows that are not PENDING and due must not be published")
}

func TestSweeperPublishesFutureRowWithinOneSweepIntervalOfItsDueTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cfg := h.cfg
	cfg.SweepInterval = time.Second
	var mu sync.Mutex
	acked := map[string]time.Time{}
	h.startRelay(cfg, func(r *Relay) {
		r.pub.ackHook = func(row deliveryRow, o origin, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := acked[row.ID]; !ok && o.source == sourceSweeper {
				acked[row.ID] = at
			}
		}
	})

	const dueIn = 3 * time.Second
	ids := h.insert(rows{n: 1, priority: herald.PriorityHigh, dueIn: dueIn})
	var due time.Time
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT next_attempt_at FROM delivery WHERE id = $1`, ids[0]).Scan(&due))

	h.waitAll(ids, 30*time.Second)
	r, _ := h.records.get(ids[0])
	// A consumer can fetch the record before the producer has handled Kafka's answer.
	var ackedAt time.Time
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		var ok bool
		ackedAt, ok = acked[ids[0]]
		return ok
	}, 10*time.Second, time.Millisecond, "the row was not published by the sweeper")
	late := ackedAt.Sub(due)
	t.Logf("future-dated row acknowledged by Kafka %v after its due time, consumed after %v (sweep interval %v)",
		late, r.first.Sub(due), cfg.SweepInterval)
	require.GreaterOrEqual(t, late, time.Duration(0), "published before it was due")
	// One sweep interval, plus the sweeper's query and Kafka's acknowledgement.
	require.Less(t, late, cfg.SweepInterval+750*time.Millisecond)
	eventually(t, 10*time.Second, func() bool { return h.status(ids[0]) == herald.StatusQueued }, "not QUEUED")
}

func TestQuietDeliveryTableStillAdvancesConfirmedFlush(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.startRelay(h.cfg)
	ids := h.insert(rows{n: 1})
	h.waitAll(ids, 60*time.Second)

	h.exec(`CREATE TABLE other_writes (id bigserial PRIMARY KEY, filler text)`)
	for i := 0; i < 20; i++ {
		h.exec(`INSERT INTO other_writes (filler) SELECT repeat('x', 100) FROM generate_series(1, 500)`)
	}
	target := h.currentWAL()
	eventually(t, 30*time.Second, func() bool { return h.confirmedFlush() >= target },
		"confirmed_flush_lsn %d stayed behind %d while only other tables wrote WAL", h.confirmedFlush(), target)
}

func TestOneTransactionOf20000Rows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cfg := h.cfg
	cfg.MaxInFlight = 2000 // the transaction is larger than the in-flight bound
	h.startRelay(cfg)

	ids := h.insert(rows{n: 20000, priority: herald.PriorityLow})
	end := h.currentWAL()
	h.waitAll(ids, 120*time.Second)
	t.Logf("duplicates: %d", h.records.duplicates(ids))
	eventually(t, 30*time.Second, func() bool { return h.confirmedFlush() >= end }, "slot not confirmed past the transaction")
	eventually(t, 30*time.Second, func() bool {
		return h.queryString(`SELECT count(*)::text FROM delivery WHERE status = 'QUEUED'`) == "20000"
	}, "not every row marked QUEUED")
}

func TestAlterTableWhileStreaming(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.startRelay(h.cfg)

	before := h.insert(rows{n: 50, priority: herald.PriorityHigh})
	h.exec(`ALTER TABLE delivery ADD COLUMN region text DEFAULT 'eu'`)
	afterAdd := h.insert(rows{n: 50, priority: herald.PriorityNormal})
	// Dropping a column in the middle moves updated_at and every later column to a new
	// position: only decoding by name survives this.
	h.exec(`ALTER TABLE delivery DROP COLUMN provider`)
	afterDrop := h.insert(rows{n: 50, priority: herald.PriorityLow})

	all := append(append(before, afterAdd...), afterDrop...)
	h.waitAll(all, 60*time.Second)
	for _, id := range afterDrop {
		r, _ := h.records.get(id)
		require.Equal(t, h.cfg.Topics[herald.PriorityLow], r.topic)
		eventually(t, 10*time.Second, func() bool { return h.status(id) == herald.StatusQueued },
			"delivery %s not QUEUED: the compare-and-set did not match the decoded row", id)
	}
}

func TestReaperReturnsLostQueuedRowAndStuckSendingRow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cfg := h.cfg
	cfg.QueuedLease = map[herald.Priority]time.Duration{herald.PriorityHigh: 2 * time.Second}
	// Leases only: with a lane watermark the lost row would go back at once (nothing was
	// ever produced to its topic), see TestReaperReturnsQueuedRowOnceItsLaneHasConsumedPastIt.
	cfg.ConsumerGroups = map[herald.Priority]string{herald.PriorityHigh: "-", herald.PriorityNormal: "-", herald.PriorityLow: "-"}
	cfg.SendingLease = 3 * time.Second
	cfg.ReapInterval = 200 * time.Millisecond
	h.startRelay(cfg)

	// Every row below is written after start, so none may reach Kafka before start + its lease.
	start := time.Now()
	// QUEUED with no record anywhere: its record was lost.
	lost := h.insert(rows{n: 1, priority: herald.PriorityHigh, status: herald.StatusQueued})
	// A LOW row QUEUED as long: its lease (the 60 min default) is not over.
	lowQueued := h.insert(rows{n: 1, priority: herald.PriorityLow, status: herald.StatusQueued})
	// SENDING on its first attempt, by a worker that died.
	stuck := h.insert(rows{n: 1, priority: herald.PriorityNormal, status: herald.StatusSending, attempts: 1})

	h.waitAll(append(lost, stuck...), 30*time.Second)
	r, _ := h.records.get(lost[0])
	require.GreaterOrEqual(t, r.first.Sub(start), 2*time.Second, "reaped before its lease was over")
	r, _ = h.records.get(stuck[0])
	require.GreaterOrEqual(t, r.first.Sub(start), 3*time.Second, "reaped before its lease was over")
	for _, id := range append(lost, stuck...) {
		eventually(t, 10*time.Second, func() bool { return h.status(id) == herald.StatusQueued }, "delivery %s", id)
	}
	require.Equal(t, "AMBIGUOUS", h.queryString(
		`SELECT outcome FROM delivery_attempt WHERE delivery_id = $1 AND attempt = 1`, stuck[0]))
	require.Equal(t, herald.StatusQueued, h.status(lowQueued[0]))
	require.Equal(t, 1, h.records.missing(lowQueued))
}

func TestUnchangedToastColumnDoesNotStopPublishing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.startRelay(h.cfg)
	ctx := context.Background()

	// A retry whose error is long and incompressible: last_error is stored out of line. The
	// retry is due at once, so the stream publishes it and marks it QUEUED.
	ids := h.insert(rows{n: 1, priority: herald.PriorityNormal, status: herald.StatusSending, attempts: 1})
	var long strings.Builder
	for long.Len() < 20000 {
		fmt.Fprintf(&long, "%x", rand.Uint64())
	}
	ok, err := delivery.Record(ctx, h.pool, ids[0], 1, time.Now(), delivery.Outcome{Status: herald.StatusPending,
		AttemptClass: "TRANSIENT", Error: long.String()})
	require.NoError(t, err)
	require.True(t, ok)
	// delivery is partitioned: the row's TOAST table is its partition's.
	toast := h.queryString(`SELECT reltoastrelid::regclass::text FROM pg_class
		WHERE oid = (SELECT tableoid FROM delivery WHERE id = $1)`, ids[0])
	require.NotEqual(t, "0", h.queryString(`SELECT count(*)::text FROM `+toast), "last_error was not stored out of line")
	h.waitAll(ids, 60*time.Second)
	eventually(t, 10*time.Second, func() bool { return h.status(ids[0]) == herald.StatusQueued }, "not QUEUED")

	// Marking it QUEUED and reaping it back to PENDING leave last_error alone: both UPDATEs
	// send it as an unchanged TOAST value, without data. The second is due and published.
	n, err := delivery.ReapQueued(ctx, h.pool, herald.PriorityNormal, 0, 10, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	eventually(t, 60*time.Second, func() bool { return h.records.duplicates(ids) == 1 }, "the reaped row was not published again")
	eventually(t, 10*time.Second, func() bool { return h.status(ids[0]) == herald.StatusQueued }, "not QUEUED")
}

func TestObservePublishedTimesEachRecordsWayOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var mu sync.Mutex
	seen := map[string]Published{}
	cfg := h.cfg
	cfg.ObservePublished = func(p Published) {
		mu.Lock()
		defer mu.Unlock()
		seen[p.DeliveryID] = p
	}
	h.startRelay(cfg)
	before := time.Now()
	ids := h.insert(rows{n: 3, priority: herald.PriorityHigh})
	h.waitAll(ids, 60*time.Second)
	eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == len(ids)
	}, "not every record observed")
	mu.Lock()
	defer mu.Unlock()
	// PostgreSQL's clock and the relay's are this machine's; the server's times are whole
	// microseconds.
	const slack = time.Millisecond
	for _, id := range ids {
		p := seen[id]
		require.False(t, p.Committed.Before(before.Add(-slack)), "committed %v before the insert began %v", p.Committed, before)
		require.False(t, p.Sent.Before(p.Committed), "sent %v before committed %v", p.Sent, p.Committed)
		require.False(t, p.Received.Before(p.Sent.Add(-slack)), "received %v before sent %v", p.Received, p.Sent)
		require.False(t, p.Produced.Before(p.Received), "produced before received")
		require.False(t, p.Acked.Before(p.Produced), "acked before produced")
	}
}

// TestEachPriorityGoesOutOnItsOwnProducer: with Config.Producers, each priority's records,
// from the stream and from the sweeper, are produced by its own client and by no other, a
// lingering one's too.
func TestEachPriorityGoesOutOnItsOwnProducer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	counts := map[herald.Priority]*producedTopics{}
	cfg := h.cfg
	cfg.Producers = map[herald.Priority]*kgo.Client{}
	linger := map[herald.Priority]time.Duration{herald.PriorityLow: 5 * time.Millisecond}
	for _, p := range herald.Priorities {
		counts[p] = &producedTopics{n: map[string]int{}}
		cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.ProducerLinger(linger[p]), kgo.WithHooks(counts[p]))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		cfg.Producers[p] = cl
	}
	h.startRelay(cfg)

	high := h.insert(rows{n: 4, priority: herald.PriorityHigh})
	normal := h.insert(rows{n: 5, priority: herald.PriorityNormal})
	low := h.insert(rows{n: 6, priority: herald.PriorityLow})
	swept := h.insert(rows{n: 2, priority: herald.PriorityLow, dueIn: time.Second}) // the sweeper's
	h.waitAll(append(append(append(high, normal...), low...), swept...), 60*time.Second)

	require.Equal(t, map[string]int{h.cfg.Topics[herald.PriorityHigh]: 4}, counts[herald.PriorityHigh].get())
	require.Equal(t, map[string]int{h.cfg.Topics[herald.PriorityNormal]: 5}, counts[herald.PriorityNormal].get())
	require.Equal(t, map[string]int{h.cfg.Topics[herald.PriorityLow]: 8}, counts[herald.PriorityLow].get())
}

// producedTopics counts the records a client buffered for producing, by topic.
type producedTopics struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *producedTopics) OnProduceRecordBuffered(r *kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Topic]++
}

func (c *producedTopics) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}
