package cdc

import (
	"context"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/cekafka"
)

// eventTable is the status-event outbox (migration 00090, docs/events.md). The publication
// carries its inserts beside delivery's, through the partition root.
const eventTable = "delivery_event"

// deliveryTable is the table whose due rows the relay publishes.
const deliveryTable = "delivery"

// eventRow is a delivery_event row as the relay publishes it.
type eventRow struct {
	ID             string
	Type           herald.EventType
	ClientID       string
	NotificationID string
	DeliveryID     string
	OccurredAt     time.Time
	Data           []byte // herald.EventData, JSON
	Traceparent    string // "" when the delivery has none
}

// decodeEvent reads an event row out of an insert's tuple. Inserts carry every column, so
// no value arrives as unchanged TOAST.
func (d *tupleDecoder) decodeEvent(rel *relation, tuple *pglogrepl.TupleData) (eventRow, error) {
	var e eventRow
	if tuple == nil {
		return e, fmt.Errorf("no tuple")
	}
	col := func(name string) (string, bool, error) {
		i, ok := rel.columns[name]
		if !ok || i >= len(tuple.Columns) {
			return "", false, fmt.Errorf("column %s missing from relation %s.%s", name, rel.namespace, rel.name)
		}
		switch c := tuple.Columns[i]; c.DataType {
		case pglogrepl.TupleDataTypeText:
			return string(c.Data), true, nil
		case pglogrepl.TupleDataTypeNull:
			return "", false, nil
		default:
			return "", false, fmt.Errorf("column %s: unexpected tuple data type %q", name, c.DataType)
		}
	}
	var typ, at, data string
	for _, f := range []struct {
		name     string
		into     *string
		nullable bool
	}{{"id", &e.ID, false}, {"type", &typ, false}, {"client_id", &e.ClientID, false},
		{"notification_id", &e.NotificationID, false}, {"delivery_id", &e.DeliveryID, false},
		{"occurred_at", &at, false}, {"data", &data, false}, {"traceparent", &e.Traceparent, true}} {
		v, ok, err := col(f.name)
		if err == nil && !ok && !f.nullable {
			err = fmt.Errorf("column %s is null", f.name)
		}
		if err != nil {
			return e, err
		}
		*f.into = v
	}
	e.Type, e.Data = herald.EventType(typ), []byte(data)
	var err error
	if e.OccurredAt, err = d.timestamptz(at); err != nil {
		return e, fmt.Errorf("column occurred_at: %w", err)
	}
	return e, nil
}

// record is the Kafka record of the event, a CloudEvents 1.0 event in the Kafka binding's
// binary mode: id, source herald.EventSource, the type, subject = the delivery id, time =
// occurred_at, the heraldclient extension and the data as application/json; key = the
// notification id (a notification's events stay in one partition, in order), and the
// delivery's traceparent when it has one. cekafka.WriteBinary writes the headers the SDK's
// binding would, without building an event.Event for every row.
func (e eventRow) record(topic string) (*kgo.Record, error) {
	rec := &kgo.Record{Topic: topic, Key: []byte(e.NotificationID), Headers: make([]kgo.RecordHeader, 0, 9)}
	if e.Traceparent != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: herald.HeaderTraceparent, Value: []byte(e.Traceparent)})
	}
	err := cekafka.WriteBinary(cekafka.Binary{ID: e.ID, Source: herald.EventSource, Type: string(e.Type),
		Subject: e.DeliveryID, Time: e.OccurredAt, DataContentType: event.ApplicationJSON,
		Extensions: []cekafka.Extension{{Name: herald.EventClientExtension, Value: e.ClientID}}, Data: e.Data}, rec)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	return rec, nil
}

// publishEvent produces the record of e to the events topic. done is called exactly once,
// from a Kafka client goroutine, with the outcome.
func (p *publisher) publishEvent(e eventRow, done func(error)) {
	rec, err := e.record(p.eventsTopic)
	if err != nil {
		done(err)
		return
	}
	p.inFlight.Add(1)
	p.events.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
		p.inFlight.Add(-1)
		if err != nil {
			err = fmt.Errorf("produce event %s to %s: %w", e.ID, p.eventsTopic, err)
		} else {
			p.metrics.eventPublished(e.Type)
		}
		done(err)
	})
}
