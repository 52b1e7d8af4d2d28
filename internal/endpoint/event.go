package endpoint

import (
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/heraldhq/herald"
)

// Event is one status event as the events role reads it from Kafka and replay reads it from
// the outbox (delivery_event).
type Event struct {
	ID       string
	Type     herald.EventType
	ClientID string
	// Subject is the delivery id.
	Subject string
	Time    time.Time
	// Data is the event's data, herald.EventData as JSON.
	Data json.RawMessage
}

// Body returns the event in the CloudEvents JSON event format (structured mode), as POSTed
// to endpoints with Content-Type application/cloudevents+json.
func (e *Event) Body() ([]byte, error) {
	ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ce.SetID(e.ID)
	ce.SetType(string(e.Type))
	ce.SetSource(herald.EventSource)
	ce.SetSubject(e.Subject)
	ce.SetTime(e.Time)
	ce.SetExtension(herald.EventClientExtension, e.ClientID)
	ce.SetDataContentType(cloudevents.ApplicationJSON)
	ce.DataEncoded = e.Data
	if err := ce.Validate(); err != nil {
		return nil, fmt.Errorf("event %s: %w", e.ID, err)
	}
	b, err := json.Marshal(ce)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	return b, nil
}
