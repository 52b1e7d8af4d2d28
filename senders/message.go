// Package senders holds what every provider sender shares: the message a sender is asked to
// deliver, its result, and the error classes that tell dispatch whether a retry makes sense.
// Each provider lives in its own package below this one (senders/twilio, senders/smtp, ...).
// The Sender interface itself is declared by its consumer, package dispatch.
package senders

import (
	"encoding/json"
	"time"

	"github.com/heraldhq/herald"
)

// Message is one delivery attempt, with its recipient resolved at send time and its content
// rendered from the template.
type Message struct {
	// DeliveryID is the delivery's UUID. Senders pass it to the provider as the idempotency
	// key wherever the provider takes one (apns-id, Message-ID, webhook header, FCM data).
	DeliveryID     string
	NotificationID string
	// ClientID is the API client that created the notification; the webhook sender signs
	// with that client's secret.
	ClientID string
	Channel  herald.Channel
	Priority herald.Priority
	// Attempt is the 1-based number of this attempt.
	Attempt  int
	Category string
	Template string
	Locale   string
	Payload  json.RawMessage
	To       Recipient
	Content  Content
	// AcceptedAt is when the API accepted the notification (its delivery row's created_at),
	// on this process's clock; zero when unknown. Dispatch measures accept → provider call
	// latency from it.
	AcceptedAt time.Time
}

// Recipient is where a message goes: the user's stored contact, overridden field by field by
// the notification's inline "to". It holds personal data: never log it.
type Recipient struct {
	UserID     int64
	Email      string
	Phone      string // E.164
	PushTokens []PushToken
	WebhookURL string
}

// PushToken is one registered device.
type PushToken struct {
	Token    string
	Platform string // "FCM" or "APNS"
}

// Content is the rendered message. Each channel reads its own fields.
type Content struct {
	Title string // PUSH
	Body  string // PUSH

	Subject string // EMAIL
	Text    string // EMAIL text part; SMS body
	HTML    string // EMAIL HTML part

	JSON json.RawMessage // WEBHOOK body
}

// Result describes an accepted message.
type Result struct {
	// Provider is the provider account that took the message, e.g. "sms:twilio".
	Provider string
	// ProviderMessageID is the provider's id for the message, when it returns one.
	ProviderMessageID string
	// Code is the provider's response code (an HTTP status, an SMTP reply code).
	Code string
	// InvalidTokens lists the push tokens the provider reported as no longer valid
	// (FCM UNREGISTERED, APNs Unregistered/BadDeviceToken). Dispatch removes them from the
	// user's push_token rows. The push sender sets it also when Send returns an error.
	InvalidTokens []string
}
