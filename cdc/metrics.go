package cdc

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/attrset"
	"github.com/heraldhq/herald/internal/delivery"
)

const instrumentation = "github.com/heraldhq/herald/cdc"

// metrics are the relay's OpenTelemetry instruments. Observable values (slot lag, records
// in flight, leadership) are read from fields the relay updates.
type metrics struct {
	commitToPublish metric.Float64Histogram
	publishedCount  metric.Int64Counter
	markedQueued    metric.Int64Counter
	swept           metric.Int64Counter
	reaped          metric.Int64Counter
	expired         metric.Int64Counter
	eventsWritten   metric.Int64Counter
	eventsPublished metric.Int64Counter

	slotLagBytes atomic.Int64 // -1 when unknown
	slotLagMilli atomic.Int64 // the slot's flush lag in ms, -1 when unknown
	leader       atomic.Bool
	reg          metric.Registration
}

func newMetrics(pub *publisher, slot string) (*metrics, error) {
	meter := otel.Meter(instrumentation)
	m := &metrics{}
	m.slotLagBytes.Store(-1)
	m.slotLagMilli.Store(-1)
	var err error
	if m.commitToPublish, err = meter.Float64Histogram("herald.cdc.commit_to_publish",
		metric.WithUnit("s"),
		metric.WithDescription("Time from a delivery row's commit to Kafka's acknowledgement of its record."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)); err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	if m.publishedCount, err = meter.Int64Counter("herald.cdc.published",
		metric.WithDescription("Delivery records acknowledged by Kafka, by priority and source (stream, sweeper).")); err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	if m.markedQueued, err = meter.Int64Counter("herald.cdc.marked_queued",
		metric.WithDescription("Delivery rows moved from PENDING to QUEUED after Kafka acknowledged them.")); err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	if m.swept, err = meter.Int64Counter("herald.cdc.sweeper.published",
		metric.WithDescription("Rows the sweeper published, by reason (due: became due later; missed: the stream missed them).")); err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	if m.reaped, err = meter.Int64Counter("herald.cdc.reaper.reaped",
		metric.WithDescription("Rows the reaper returned to PENDING, by the status they left and priority.")); err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	if m.expired, err = meter.Int64Counter("herald.cdc.sweeper.expired",
		metric.WithDescription("PENDING rows the sweeper ended EXPIRED because their expires_at passed.")); err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	if m.eventsWritten, err = meter.Int64Counter("herald.events.written",
		metric.WithDescription("Status events read from the outbox's committed inserts, by type (docs/events.md); a relay that resumes from its slot counts the unconfirmed ones again.")); err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	if m.eventsPublished, err = meter.Int64Counter("herald.events.published",
		metric.WithDescription("Status events acknowledged by Kafka on the events topic, by type.")); err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	lag, err := meter.Int64ObservableGauge("herald.cdc.slot_lag",
		metric.WithUnit("By"),
		metric.WithDescription("pg_current_wal_lsn() - confirmed_flush_lsn of the relay's slot, as last measured by the leader."))
	if err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	lagTime, err := meter.Float64ObservableGauge("herald.cdc.slot_flush_lag",
		metric.WithUnit("s"),
		metric.WithDescription("PostgreSQL's flush_lag of the relay's walsender (pg_stat_replication): how long WAL waits until the relay confirms it; 0 when caught up."))
	if err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	inFlight, err := meter.Int64ObservableGauge("herald.cdc.records_in_flight",
		metric.WithDescription("Records handed to Kafka and not yet acknowledged."))
	if err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	leader, err := meter.Int64ObservableGauge("herald.cdc.leader",
		metric.WithDescription("1 while this process is the active relay."))
	if err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	slotAttr := metric.WithAttributes(attribute.String("herald.slot", slot))
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if v := m.slotLagBytes.Load(); v >= 0 && m.leader.Load() {
			o.ObserveInt64(lag, v, slotAttr)
		}
		if v := m.slotLagMilli.Load(); v >= 0 && m.leader.Load() {
			o.ObserveFloat64(lagTime, float64(v)/1000, slotAttr)
		}
		o.ObserveInt64(inFlight, pub.inFlight.Load(), slotAttr)
		var l int64
		if m.leader.Load() {
			l = 1
		}
		o.ObserveInt64(leader, l, slotAttr)
		return nil
	}, lag, lagTime, inFlight, leader)
	if err != nil {
		return nil, fmt.Errorf("cdc metrics: %w", err)
	}
	return m, nil
}

// The labels of the per-record metrics, by their values.
var (
	publishedAttrs = attrset.New(func(k [2]string) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("herald.priority", k[0]), attribute.String("herald.source", k[1])}
	})
	priorityAttrs = attrset.New(func(p herald.Priority) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("herald.priority", string(p))}
	})
	eventAttrs = attrset.New(func(t herald.EventType) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("herald.event_type", string(t))}
	})
)

func (m *metrics) published(p herald.Priority, o origin, ackedAt time.Time) {
	m.publishedCount.Add(context.Background(), 1, publishedAttrs.Of([2]string{string(p), o.source}))
	if !o.commitTime.IsZero() {
		m.commitToPublish.Record(context.Background(), ackedAt.Sub(o.commitTime).Seconds(), priorityAttrs.Of(p))
	}
}

func (m *metrics) eventWritten(t herald.EventType) {
	m.eventsWritten.Add(context.Background(), 1, eventAttrs.Of(t))
}

func (m *metrics) eventPublished(t herald.EventType) {
	m.eventsPublished.Add(context.Background(), 1, eventAttrs.Of(t))
}

func (m *metrics) marked(ctx context.Context, n int64) {
	m.markedQueued.Add(ctx, n)
}

func (m *metrics) sweptRows(ctx context.Context, reason string, n int) {
	m.swept.Add(ctx, int64(n), metric.WithAttributes(attribute.String("herald.reason", reason)))
}

func (m *metrics) reapedRows(ctx context.Context, from herald.Status, p herald.Priority, n int64) {
	m.reaped.Add(ctx, n, metric.WithAttributes(attribute.String("herald.from", string(from)), attribute.String("herald.priority", string(p))))
}

func (m *metrics) expiredRows(ctx context.Context, n int64) {
	m.expired.Add(ctx, n)
	// The bulk expiry does not return the rows' channels and priorities.
	delivery.CountFinal(ctx, delivery.Final{Status: herald.StatusExpired}, n)
}

func (m *metrics) close() error { return m.reg.Unregister() }
