package receipts

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// sendgridResults maps an Event Webhook event to a result; processed, deferred and the
// engagement events other than open are steps on the way.
var sendgridResults = map[string]herald.Status{
	"delivered": herald.StatusDelivered,
	"open":      herald.StatusDelivered,
	"click":     herald.StatusDelivered,
	"bounce":    herald.StatusUndelivered,
	"dropped":   herald.StatusUndelivered,
	"blocked":   herald.StatusUndelivered,
}

// sendgridEvent is the part of an Event Webhook event herald reads. The delivery id comes
// back as the custom argument the sender set (sendgrid.DeliveryIDArg), at the event's top
// level.
type sendgridEvent struct {
	Event      string          `json:"event"`
	Timestamp  int64           `json:"timestamp"`
	Status     string          `json:"status"`
	Type       string          `json:"type"`
	DeliveryID string          `json:"herald_delivery_id"`
	MessageID  json.RawMessage `json:"sg_message_id"`
}

// sendgrid checks the ECDSA signature of the timestamp and the raw body (sendgrid-go's
// helpers/eventwebhook) and reads the array of events; events without a delivery id (mail
// herald did not send) are skipped.
func (x *Receiver) sendgrid(r *http.Request, body []byte) ([]delivery.Receipt, error) {
	sig, ts := r.Header.Get(eventwebhook.VerificationHTTPHeader), r.Header.Get(eventwebhook.TimestampHTTPHeader)
	if sig == "" || ts == "" {
		return nil, errBadSignature
	}
	if ok, err := eventwebhook.VerifySignature(x.cfg.SendGridPublicKey, body, sig, ts); err != nil || !ok {
		return nil, errBadSignature
	}
	var events []sendgridEvent
	if err := json.Unmarshal(body, &events); err != nil {
		return nil, err
	}
	out := make([]delivery.Receipt, 0, len(events))
	for _, e := range events {
		if e.DeliveryID == "" || e.Event == "" {
			continue
		}
		at := time.Unix(e.Timestamp, 0).UTC()
		if e.Timestamp == 0 {
			at = time.Now().UTC()
		}
		out = append(out, delivery.Receipt{DeliveryID: e.DeliveryID, Status: e.Event, Code: e.Status,
			Result: sendgridResults[e.Event], At: at})
	}
	if len(out) == 0 && len(events) > 0 {
		return nil, errors.New("no event names a delivery")
	}
	return out, nil
}
