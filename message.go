package herald

import (
	"encoding/json"
	"fmt"
)

// Kafka record headers set by the relay on every delivery record.
const (
	HeaderTraceparent = "traceparent"
	HeaderDeliveryID  = "herald-delivery-id"
	HeaderAttempt     = "herald-attempt"
)

// MessageVersion is the version of DeliveryMessage written by this build.
const MessageVersion = 1

// DeliveryMessage is the value of a Kafka record on a notifications topic. The record key is
// the delivery id. The message only says which row to look at: the worker reads the delivery
// row for the truth, so a stale or duplicated record is harmless.
type DeliveryMessage struct {
	Version        int      `json:"v"`
	DeliveryID     string   `json:"deliveryId"`
	NotificationID string   `json:"notificationId"`
	Channel        Channel  `json:"channel"`
	Priority       Priority `json:"priority"`
	// Attempts is the delivery's attempt count when it was published.
	Attempts int `json:"attempts"`
}

// Marshal encodes m as JSON, stamping the current version.
func (m DeliveryMessage) Marshal() ([]byte, error) {
	m.Version = MessageVersion
	return json.Marshal(m)
}

// UnmarshalDeliveryMessage decodes a record value. It accepts every version up to
// MessageVersion.
func UnmarshalDeliveryMessage(b []byte) (DeliveryMessage, error) {
	var m DeliveryMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode delivery message: %w", err)
	}
	if m.Version < 1 || m.Version > MessageVersion {
		return m, fmt.Errorf("decode delivery message: unsupported version %d", m.Version)
	}
	if m.DeliveryID == "" {
		return m, fmt.Errorf("decode delivery message: no delivery id")
	}
	return m, nil
}
