package receipts

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/twilio/twilio-go/client"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// TwilioSignatureHeader carries Twilio's signature of a callback.
const TwilioSignatureHeader = "X-Twilio-Signature"

// twilioResults maps Twilio's MessageStatus to a result; a status not listed (queued,
// accepted, scheduled, sending, sent, ...) is a step on the way.
var twilioResults = map[string]herald.Status{
	"delivered":   herald.StatusDelivered,
	"read":        herald.StatusDelivered,
	"undelivered": herald.StatusUndelivered,
	"failed":      herald.StatusUndelivered,
}

// twilio checks X-Twilio-Signature (HMAC-SHA1 of the URL Twilio called and every POST
// parameter, sorted; twilio-go's RequestValidator, in constant time) and reads the status
// callback: deliveryId from the URL, MessageStatus and ErrorCode from the form.
func (x *Receiver) twilio(r *http.Request, body []byte) ([]delivery.Receipt, error) {
	sig := r.Header.Get(TwilioSignatureHeader)
	v := client.NewRequestValidator(x.cfg.TwilioAuthToken)
	if sig == "" || !v.ValidateBody(x.cfg.PublicURL+r.URL.RequestURI(), body, sig) {
		return nil, errBadSignature
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	id := r.URL.Query().Get(DeliveryIDParam)
	status := form.Get("MessageStatus")
	if id == "" || status == "" {
		return nil, errors.New("no deliveryId or MessageStatus")
	}
	return []delivery.Receipt{{DeliveryID: id, Status: status, Code: form.Get("ErrorCode"),
		Result: twilioResults[status], At: time.Now().UTC()}}, nil
}
