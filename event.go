package herald

import (
	"fmt"
	"time"
)

// EventType is the CloudEvents type of a status event: one per client-visible change of a
// delivery. docs/events.md describes each.
type EventType string

const (
	EventSent          EventType = "herald.delivery.sent"
	EventDelivered     EventType = "herald.delivery.delivered"
	EventUndelivered   EventType = "herald.delivery.undelivered"
	EventFailed        EventType = "herald.delivery.failed"
	EventExpired       EventType = "herald.delivery.expired"
	EventCancelled     EventType = "herald.delivery.cancelled"
	EventAttemptFailed EventType = "herald.delivery.attempt_failed"
)

// EventTypes lists every event type.
var EventTypes = []EventType{
	EventSent, EventDelivered, EventUndelivered, EventFailed, EventExpired, EventCancelled, EventAttemptFailed,
}

// ParseEventType returns the event type named s, or an error.
func ParseEventType(s string) (EventType, error) {
	for _, t := range EventTypes {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown event type %q", s)
}

// DefaultEventsTopic is the Kafka topic the relay streams status events to.
const DefaultEventsTopic = "herald.events"

// The CloudEvents attributes of every status event, beside the required ones (id = the event
// id, a UUIDv7; type = its EventType; time = EventData.OccurredAt; datacontenttype
// application/json).
const (
	// EventSource is the CloudEvents source of every event herald writes.
	EventSource = "/herald/deliveries"
	// EventClientExtension is the CloudEvents extension attribute that names the API client
	// whose notification the event is about. Only that client's webhook endpoints receive it.
	EventClientExtension = "heraldclient"
)

// EventData is the data of a status event. The CloudEvents subject is DeliveryID; the Kafka
// record key is NotificationID, so that the events of one notification stay in order.
type EventData struct {
	NotificationID string   `json:"notificationId"`
	DeliveryID     string   `json:"deliveryId"`
	Channel        Channel  `json:"channel"`
	Priority       Priority `json:"priority"`
	// Status is the delivery's status after the change (PENDING for an attempt_failed that
	// will be retried).
	Status  Status `json:"status"`
	Attempt int    `json:"attempt"`
	// Provider is the account of the attempt, e.g. "sms:twilio"; empty when no provider was
	// called (expired, cancelled).
	Provider          string      `json:"provider,omitempty"`
	ProviderMessageID string      `json:"providerMessageId,omitempty"`
	Error             *EventError `json:"error,omitempty"`
	// Retryable is set on attempt_failed: whether herald will try again.
	Retryable *bool `json:"retryable,omitempty"`
	// TokensRemoved is how many push tokens the attempt found invalid (APNs 410, FCM
	// UNREGISTERED) and herald removed from the user's profile; absent when none.
	TokensRemoved int `json:"tokensRemoved,omitempty"`
	// Sequence increases with every event of the same delivery, so a receiver can order them.
	Sequence   int64     `json:"sequence"`
	OccurredAt time.Time `json:"occurredAt"`
}

// EventError says why an attempt or a delivery failed.
type EventError struct {
	// Class is the attempt outcome's class: permanent, transient or ambiguous.
	Class string `json:"class,omitempty"`
	// Code is the provider's own error code, or herald's reason (e.g. "expired").
	Code string `json:"code,omitempty"`
}
