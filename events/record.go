package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
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
	ce, err := binding.ToEvent(context.Background(), recordMessage{cekafka.NewMessage(rec), rec})
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

// recordMessage adds to cekafka's message the metadata reader that binding.ToEvent asks
// for: the value of one attribute or extension, from its header.
type recordMessage struct {
	*cekafka.Message
	rec *kgo.Record
}

func (m recordMessage) header(name string) any {
	for _, h := range m.rec.Headers {
		if strings.EqualFold(h.Key, name) {
			return string(h.Value)
		}
	}
	return nil
}

// GetAttribute implements binding.MessageMetadataReader.
func (m recordMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	v := spec.VS.Version(spec.V1.String())
	a := v.AttributeFromKind(k)
	if a == nil {
		return nil, nil
	}
	if k == spec.DataContentType {
		return a, m.header(cekafka.ContentType)
	}
	return a, m.header(cekafka.Prefix + a.Name())
}

// GetExtension implements binding.MessageMetadataReader.
func (m recordMessage) GetExtension(name string) any { return m.header(cekafka.Prefix + name) }
