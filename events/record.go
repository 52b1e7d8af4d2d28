package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/endpoint"
)

// The CloudEvents Kafka protocol binding, binary mode: each attribute a "ce_" header, the
// record value the data.
const (
	headerPrefix      = "ce_"
	headerSpecVersion = headerPrefix + "specversion"
	headerID          = headerPrefix + "id"
	headerType        = headerPrefix + "type"
	headerSubject     = headerPrefix + "subject"
	headerTime        = headerPrefix + "time"
	headerClient      = headerPrefix + herald.EventClientExtension
)

var errNotAnEvent = errors.New("not a herald status event")

// parseRecord reads a herald.events record into an event. A record that is not a valid
// CloudEvents 1.0 status event of a client is errNotAnEvent: it is skipped and counted.
func parseRecord(r *kgo.Record) (endpoint.Event, error) {
	h := map[string]string{}
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	if h[headerSpecVersion] != "1.0" {
		return endpoint.Event{}, fmt.Errorf("%w: specversion %q", errNotAnEvent, h[headerSpecVersion])
	}
	t, err := herald.ParseEventType(h[headerType])
	if err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: %v", errNotAnEvent, err)
	}
	id, err := uuid.Parse(h[headerID])
	if err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: id", errNotAnEvent)
	}
	client, err := uuid.Parse(h[headerClient])
	if err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: event %s: %s", errNotAnEvent, id, headerClient)
	}
	at, err := time.Parse(time.RFC3339Nano, h[headerTime])
	if err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: event %s: time", errNotAnEvent, id)
	}
	if !json.Valid(r.Value) {
		return endpoint.Event{}, fmt.Errorf("%w: event %s: data is not JSON", errNotAnEvent, id)
	}
	return endpoint.Event{ID: id.String(), Type: t, ClientID: client.String(), Subject: h[headerSubject],
		Time: at, Data: r.Value}, nil
}
