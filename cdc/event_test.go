package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/cekafka"
	"github.com/heraldhq/herald/internal/delivery"
)

// eventCollector consumes the test's events topic from the start and keeps every record by
// event id (the ce_id header).
type eventCollector struct {
	mu   sync.Mutex
	byID map[string][]*kgo.Record
}

func (h *harness) collectEvents() *eventCollector {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.ConsumeTopics(h.cfg.EventsTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond))
	require.NoError(h.t, err)
	c := &eventCollector{byID: map[string][]*kgo.Record{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			fetches := cl.PollFetches(ctx)
			if ctx.Err() != nil || fetches.IsClientClosed() {
				return
			}
			c.mu.Lock()
			fetches.EachRecord(func(r *kgo.Record) {
				for _, hd := range r.Headers {
					if hd.Key == "ce_id" {
						c.byID[string(hd.Value)] = append(c.byID[string(hd.Value)], r)
					}
				}
			})
			c.mu.Unlock()
		}
	})
	h.t.Cleanup(func() {
		cancel()
		wg.Wait()
		cl.Close()
	})
	return c
}

// missing returns how many of ids have no record yet.
func (c *eventCollector) missing(ids []string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, id := range ids {
		if len(c.byID[id]) == 0 {
			n++
		}
	}
	return n
}

func (c *eventCollector) first(id string) *kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id][0]
}

// eventIDs lists the ids of every event in the outbox.
func (h *harness) eventIDs() []string {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT id::text FROM delivery_event`)
	require.NoError(h.t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(h.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(h.t, rows.Err())
	return ids
}

// TestEventRecordIsABinaryModeCloudEvent: a SENT transition's event reaches the events
// topic as a CloudEvents 1.0 event in the Kafka binding's binary mode, read back with the
// CloudEvents SDK: every attribute from the outbox row, the data as written, key = the
// notification id, the delivery's traceparent.
func TestEventRecordIsABinaryModeCloudEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	events := h.collectEvents()
	h.startRelay(h.cfg)
	id := h.insert(rows{n: 1, priority: herald.PriorityHigh, status: herald.StatusSending, attempts: 1, traceparent: testTraceparent})[0]
	ok, err := delivery.Record(context.Background(), h.pool, id, 1, time.Now(),
		delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:twilio", ProviderID: "SM1"})
	require.NoError(t, err)
	require.True(t, ok)

	var evID, nid, client string
	var occurred time.Time
	var data []byte
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT id::text, notification_id::text, client_id::text, occurred_at, data
		FROM delivery_event WHERE delivery_id = $1 AND type = 'herald.delivery.sent'`, id).Scan(&evID, &nid, &client, &occurred, &data))
	eventually(t, 30*time.Second, func() bool { return events.missing([]string{evID}) == 0 }, "event %s never reached Kafka", evID)
	rec := events.first(evID)

	msg := cekafka.NewMessage(rec)
	require.Equal(t, binding.EncodingBinary, msg.ReadEncoding())
	ce, err := binding.ToEvent(context.Background(), msg)
	require.NoError(t, err)
	require.NoError(t, ce.Validate())
	require.Equal(t, event.CloudEventsVersionV1, ce.SpecVersion())
	require.Equal(t, evID, ce.ID())
	require.Equal(t, herald.EventSource, ce.Source())
	require.Equal(t, string(herald.EventSent), ce.Type())
	require.Equal(t, id, ce.Subject())
	require.True(t, occurred.Equal(ce.Time()), "ce time %s, occurred_at %s", ce.Time(), occurred)
	require.Equal(t, event.ApplicationJSON, ce.DataContentType())
	require.Equal(t, client, ce.Extensions()[herald.EventClientExtension])
	require.Equal(t, nid, string(rec.Key))

	var got, want herald.EventData
	require.NoError(t, json.Unmarshal(ce.Data(), &got))
	require.NoError(t, json.Unmarshal(data, &want))
	require.Equal(t, want, got)
	require.Equal(t, herald.StatusSent, got.Status)
	require.Equal(t, "SM1", got.ProviderMessageID)

	headers := map[string]string{}
	for _, hd := range rec.Headers {
		headers[hd.Key] = string(hd.Value)
	}
	require.Equal(t, "1.0", headers["ce_specversion"])
	require.Equal(t, "application/json", headers["content-type"])
	require.Equal(t, client, headers["ce_heraldclient"])
	require.Equal(t, testTraceparent, headers[herald.HeaderTraceparent])
}

// TestRelayKilledMidStreamLosesNoEvent kills the relay with SIGKILL while transitions write
// events; a second relay resumes from the slot and every event of the outbox reaches the
// events topic: the slot is confirmed only past transactions whose events Kafka has.
func TestRelayKilledMidStreamLosesNoEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	events := h.collectEvents()
	cc := h.childConfig()
	cc.MaxInFlight = 200
	first := startChild(t, "first", cc)
	eventually(t, 60*time.Second, first.leader, "the relay never became leader")
	h.waitStreaming()

	// Transitions in batches of 50: each delivery's SENDING → SENT writes one event.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var total int
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond) // the load's pace
		defer tick.Stop()
		for i := 0; i < 80 && ctx.Err() == nil; i++ {
			<-tick.C
			ids, err := h.tryInsert(ctx, rows{n: 50, priority: herald.PriorityLow, status: herald.StatusSending, attempts: 1})
			if err != nil {
				continue
			}
			rs := make([]delivery.Recording, len(ids))
			for j, id := range ids {
				rs[j] = delivery.Recording{ID: id, Attempt: 1, StartedAt: time.Now(),
					Outcome: delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sms:twilio"}}
			}
			if _, err := delivery.RecordBatch(ctx, h.pool, rs); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("record batch: %v", err)
			}
			total += len(ids)
		}
	})
	eventually(t, 60*time.Second, func() bool {
		ids := h.eventIDs()
		return len(ids) >= 1500 && len(ids)-events.missing(ids) >= 500
	}, "the relay never published 500 events")
	atKill := len(h.eventIDs())
	first.kill(t)
	wg.Wait()
	ids := h.eventIDs()
	t.Logf("killed the relay with SIGKILL after %d of %d events were written", atKill, len(ids))
	require.Less(t, atKill, len(ids), "the kill must happen while events are being written")
	require.Len(t, ids, total, "one event per SENT transition")

	startChild(t, "second", cc)
	eventually(t, 120*time.Second, func() bool { return events.missing(ids) == 0 },
		"events never reached Kafka after the relay was killed")
}
