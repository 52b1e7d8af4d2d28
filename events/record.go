package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/cekafka"
	"github.com/heraldhq/herald/internal/endpoint"
)

var errNotAnEvent = errors.New("not a herald status event")

// parseRecord reads a herald.events record (the CloudEvents Kafka binding, binary mode, read
// with the SDK through internal/cekafka) into an event. A record that is not a valid
// CloudEvents status event of a client is errNotAnEvent: it is skipped and counted.
func parseRecord(rec *kgo.Record) (endpoint.Event, error) {
	ce, err := binding.ToEvent(context.Background(), cekafka.NewMessage(rec))
	if err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: %v", errNotAnEvent, err)
	}
	if err := ce.Validate(); err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: %v", errNotAnEvent, err)
	}
	t, err := herald.ParseEventType(ce.Type())
	if err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: %v", errNotAnEvent, err)
	}
	if _, err := uuid.Parse(ce.ID()); err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: id", errNotAnEvent)
	}
	client, _ := ce.Extensions()[herald.EventClientExtension].(string)
	if _, err := uuid.Parse(client); err != nil {
		return endpoint.Event{}, fmt.Errorf("%w: event %s: no %s", errNotAnEvent, ce.ID(), herald.EventClientExtension)
	}
	if !json.Valid(ce.Data()) {
		return endpoint.Event{}, fmt.Errorf("%w: event %s: data is not JSON", errNotAnEvent, ce.ID())
	}
	return endpoint.Event{ID: ce.ID(), Type: t, ClientID: client, Subject: ce.Subject(), Time: ce.Time(), Data: ce.Data()}, nil
}
