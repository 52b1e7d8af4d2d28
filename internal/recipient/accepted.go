package recipient

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// Accepted is a notification's answer: the 202 body of POST /api/notifications, stored in
// notification.response, replayed for a repeated Idempotency-Key and read by GET
// /api/notifications/{id}. A campaign lot stores the same answer for each notification it
// writes.
type Accepted struct {
	ID         string             `json:"id"`
	Deliveries []AcceptedDelivery `json:"deliveries"`
	Suppressed []Suppressed       `json:"suppressed"`
}

// AcceptedDelivery is one delivery of an Accepted answer, as it was at the accept.
type AcceptedDelivery struct {
	ID      string         `json:"id"`
	Channel herald.Channel `json:"channel"`
	Status  herald.Status  `json:"status"`
}

// Rows are the ids of a decided notification and its answer.
type Rows struct {
	NotificationID uuid.UUID
	Deliveries     []delivery.New // one per delivered channel, in the decision's order
	// Answer is the Accepted answer, encoded once: the same bytes are stored in
	// notification.response and sent as a POST's 202 body.
	Answer []byte
}

// Rows gives the notification and each delivered channel a new id (UUIDv7) and encodes the
// answer, every delivery PENDING.
func (d Decision) Rows() (Rows, error) {
	nid, err := uuid.NewV7()
	if err != nil {
		return Rows{}, fmt.Errorf("new notification id: %w", err)
	}
	ans := Accepted{ID: nid.String(), Deliveries: make([]AcceptedDelivery, len(d.Deliver)), Suppressed: d.Suppressed}
	if ans.Suppressed == nil {
		ans.Suppressed = []Suppressed{}
	}
	rows := make([]delivery.New, len(d.Deliver))
	for i, ch := range d.Deliver {
		did, err := uuid.NewV7()
		if err != nil {
			return Rows{}, fmt.Errorf("new delivery id: %w", err)
		}
		rows[i] = delivery.New{ID: did, Channel: ch}
		ans.Deliveries[i] = AcceptedDelivery{ID: did.String(), Channel: ch, Status: herald.StatusPending}
	}
	b, err := json.Marshal(ans)
	if err != nil {
		return Rows{}, fmt.Errorf("encode answer of notification %s: %w", nid, err)
	}
	return Rows{NotificationID: nid, Deliveries: rows, Answer: b}, nil
}
