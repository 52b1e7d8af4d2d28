// Package deliveryrecord builds the Kafka record of a delivery (message version 1, docs/cdc.md
// "The Kafka record"): the one place that knows its key, headers and value, shared by the
// relay, which publishes every due delivery from the WAL, and ingest, which publishes an
// accepted HIGH delivery at once after its commit.
package deliveryrecord

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
)

// New returns the record of m for topic: key the delivery id, the delivery id and attempt
// headers, and traceparent when it is not empty (the publisher's span, so that the worker's
// spans hang below it).
func New(topic string, m herald.DeliveryMessage, traceparent string) (*kgo.Record, error) {
	value, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode delivery %s: %w", m.DeliveryID, err)
	}
	rec := &kgo.Record{
		Topic: topic,
		Key:   []byte(m.DeliveryID),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: herald.HeaderDeliveryID, Value: []byte(m.DeliveryID)},
			{Key: herald.HeaderAttempt, Value: []byte(strconv.Itoa(m.Attempts + 1))}, // the attempt this record is for
		},
	}
	if traceparent != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: herald.HeaderTraceparent, Value: []byte(traceparent)})
	}
	return rec, nil
}
