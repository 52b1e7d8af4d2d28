package cdc

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/deliveryrecord"
)

// Sources of a published record, as the span and metric attribute herald.source.
const (
	sourceStream  = "stream"
	sourceSweeper = "sweeper"
)

// origin says where a record came from: the WAL (with its commit) or the sweeper.
type origin struct {
	source     string
	commitLSN  pglogrepl.LSN // 0 for the sweeper
	commitTime time.Time     // zero for the sweeper
	sentAt     time.Time     // when the walsender sent the transaction; zero for the sweeper
	receivedAt time.Time     // when the stream received the transaction; zero for the sweeper
	producedAt time.Time     // when the record was handed to the Kafka client
}

// publisher turns delivery rows into Kafka records and hands them to the producer. Every
// record gets a span that continues the row's trace; the record's traceparent header is that
// span, so the worker's spans hang below the relay's.
type publisher struct {
	producers   map[herald.Priority]*kgo.Client // each priority's: Config.Producers, or the relay's client
	events      *kgo.Client                     // the status events' producer: Config.EventsKafka, or the relay's client
	topics      map[herald.Priority]string
	eventsTopic string
	tracer      trace.Tracer
	metrics     *metrics
	inFlight    atomic.Int64 // records produced and not yet acknowledged, stream and sweeper
	// ackHook, when set (tests and benchmarks of this package), is called for every
	// acknowledged record.
	ackHook func(row deliveryRow, o origin, ackedAt time.Time)
	// observe is Config.ObservePublished.
	observe func(Published)
}

var traceContext = propagation.TraceContext{}

// publish produces one record for row. done is called exactly once, from a Kafka client
// goroutine, with the record's outcome; it must not block for long.
func (p *publisher) publish(row deliveryRow, o origin, done func(error)) {
	topic := p.topics[row.Priority]
	parent := context.Background()
	if row.Traceparent != "" {
		parent = traceContext.Extract(parent, propagation.MapCarrier{herald.HeaderTraceparent: row.Traceparent})
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.destination.name", topic),
		attribute.String("herald.delivery_id", row.ID),
		attribute.Int("herald.attempt", row.Attempts),
		attribute.String("herald.source", o.source),
	}
	if o.commitLSN != 0 {
		attrs = append(attrs, attribute.String("herald.commit_lsn", o.commitLSN.String()))
	}
	ctx, span := p.tracer.Start(parent, "cdc publish", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	tp := carrier.Get(herald.HeaderTraceparent)
	if tp == "" {
		tp = row.Traceparent
	}

	rec, err := deliveryrecord.New(topic, herald.DeliveryMessage{
		DeliveryID:     row.ID,
		NotificationID: row.NotificationID,
		Channel:        row.Channel,
		Priority:       row.Priority,
		Attempts:       row.Attempts,
	}, tp)
	if err != nil {
		span.RecordError(err)
		span.End()
		done(err)
		return
	}

	p.inFlight.Add(1)
	o.producedAt = time.Now()
	// The context only bounds the wait for buffer space, which the in-flight bound keeps
	// from ever filling; records already buffered are not cancelled by it.
	p.producers[row.Priority].Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
		p.inFlight.Add(-1)
		now := time.Now()
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "produce failed")
			err = fmt.Errorf("produce delivery %s to %s: %w", row.ID, topic, err)
		} else {
			p.metrics.published(row.Priority, o, now)
			if p.ackHook != nil {
				p.ackHook(row, o, now)
			}
			if p.observe != nil && o.source == sourceStream {
				p.observe(Published{DeliveryID: row.ID, Committed: o.commitTime, Sent: o.sentAt, Received: o.receivedAt, Produced: o.producedAt, Acked: now})
			}
		}
		span.End()
		done(err)
	})
}
