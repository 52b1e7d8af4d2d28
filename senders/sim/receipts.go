package sim

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/receipts"
)

// Receipts configures the delivery receipts the simulator sends back, like the real
// providers: to the URL each message names (Twilio's StatusCallback, Vonage's callback) or to
// the configured Event Webhook URL (SendGrid), signed, at least once (a failed POST is tried
// again; some are sent twice), sometimes out of order (the final receipt before the step on
// the way). A nil Config.Receipts sends none.
type Receipts struct {
	// Delivered is the share (0..1) of accepted messages whose final receipt says delivered;
	// the others say undelivered (Twilio undelivered 30005, Vonage failed, SendGrid bounce).
	Delivered float64 `json:"delivered"`
	// Delay is the time from the acceptance to the first receipt.
	Delay Latency `json:"delay"`
	// Duplicate is the share of receipts sent twice; Reorder the share of messages whose
	// final receipt goes before the step on the way.
	Duplicate float64 `json:"duplicate"`
	Reorder   float64 `json:"reorder"`
	// TwilioAuthToken and VonageSignatureSecret sign those receipts; none is sent for a
	// provider without its secret.
	TwilioAuthToken       string `json:"-"`
	VonageSignatureSecret string `json:"-"`
	// SendGridKey signs the Event Webhook posts to SendGridEventsURL (herald's
	// <public-url>/providers/sendgrid/events); none is sent without both.
	SendGridKey       *ecdsa.PrivateKey `json:"-"`
	SendGridEventsURL string            `json:"sendgridEventsUrl"`
}

// ReceiptOutcome is the outcome of the records of the receipts the simulator sent (provider
// "<provider>.receipt", Status = herald's answer, 0 when unreachable). They are not
// deliveries.
const ReceiptOutcome Outcome = "receipt"

func (r *Receipts) validate() error {
	for _, v := range []float64{r.Delivered, r.Duplicate, r.Reorder} {
		if v < 0 || v > 1 {
			return errors.New("sim: receipt shares must be between 0 and 1")
		}
	}
	return r.Delay.validate()
}

// receiptPost is one receipt: where it goes and how it is signed.
type receiptPost struct {
	url         string
	contentType string
	header      http.Header
	body        []byte
}

// receiptSteps are the receipts of one accepted message of provider: a step on the way, then
// the final one; nil when the message asks for none or the provider has no secret.
func (s *Sim) receiptSteps(provider string, body []byte, key string, delivered bool) []receiptPost {
	rc := s.cfg.Receipts
	switch {
	case provider == Twilio && rc.TwilioAuthToken != "":
		form, _ := url.ParseQuery(string(body))
		if cb := form.Get("StatusCallback"); cb != "" {
			return []receiptPost{twilioReceipt(rc.TwilioAuthToken, cb, "sent", ""),
				twilioReceipt(rc.TwilioAuthToken, cb, pick(delivered, "delivered", "undelivered"), pick(delivered, "", "30005"))}
		}
	case provider == Vonage && rc.VonageSignatureSecret != "":
		form, _ := url.ParseQuery(string(body))
		if cb := form.Get("callback"); cb != "" {
			return []receiptPost{vonageReceipt(rc.VonageSignatureSecret, cb, key, "accepted", "0"),
				vonageReceipt(rc.VonageSignatureSecret, cb, key, pick(delivered, "delivered", "failed"), pick(delivered, "0", "1"))}
		}
	case provider == SendGrid && rc.SendGridKey != nil && rc.SendGridEventsURL != "" && key != "":
		return []receiptPost{sendGridReceipt(rc.SendGridKey, rc.SendGridEventsURL, key, "processed"),
			sendGridReceipt(rc.SendGridKey, rc.SendGridEventsURL, key, pick(delivered, "delivered", "bounce"))}
	}
	return nil
}

func pick(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func twilioReceipt(token, cb, status, code string) receiptPost {
	form := url.Values{"MessageSid": {fmt.Sprintf("SM%032x", messageSeq.Add(1))}, "MessageStatus": {status},
		"SmsStatus": {status}, "AccountSid": {"ACsimulator"}, "ApiVersion": {"2010-04-01"}}
	if code != "" {
		form.Set("ErrorCode", code)
	}
	h := http.Header{receipts.TwilioSignatureHeader: {receipts.TwilioSign(token, cb, form)}}
	return receiptPost{url: cb, contentType: "application/x-www-form-urlencoded", header: h, body: []byte(form.Encode())}
}

func vonageReceipt(secret, cb, key, status, code string) receiptPost {
	now := time.Now().UTC()
	p := map[string]string{"messageId": fmt.Sprintf("%016X", messageSeq.Add(1)), "msisdn": "447700900000", "to": "Herald",
		"network-code": "23410", "price": "0.03330000", "status": status, "scts": now.Format("0601021504"),
		"err-code": code, "api-key": "simvonagekey", "client-ref": key, "message-timestamp": now.Format(time.DateTime),
		"timestamp": strconv.FormatInt(now.Unix(), 10), "nonce": strconv.FormatInt(messageSeq.Add(1), 10)}
	p["sig"] = receipts.VonageSign(secret, p)
	form := url.Values{}
	for k, v := range p {
		form.Set(k, v)
	}
	return receiptPost{url: cb, contentType: "application/x-www-form-urlencoded", header: http.Header{}, body: []byte(form.Encode())}
}

func sendGridReceipt(key *ecdsa.PrivateKey, eventsURL, deliveryID, event string) receiptPost {
	now := time.Now()
	e := map[string]any{"email": "recipient@example.com", "timestamp": now.Unix(), "event": event,
		"sg_event_id": fmt.Sprintf("sim%019d", messageSeq.Add(1)), "sg_message_id": fmt.Sprintf("sim%019d.filter", messageSeq.Add(1)),
		"herald_delivery_id": deliveryID}
	if event == "bounce" {
		e["status"], e["type"], e["reason"] = "5.1.1", "bounce", "550 5.1.1 unknown recipient"
	}
	body, _ := json.Marshal([]any{e})
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, _ := receipts.SendGridSign(key, ts, body)
	h := http.Header{"X-Twilio-Email-Event-Webhook-Signature": {sig}, "X-Twilio-Email-Event-Webhook-Timestamp": {ts}}
	return receiptPost{url: eventsURL, contentType: "application/json", header: h, body: body}
}

// receiptTries bounds the POSTs of one receipt: the first and four retries, 500 ms apart and
// doubling, as a provider retries a receipt that was not answered 2xx.
const receiptTries = 5

// sendReceipts sends the receipts of one accepted message after the configured delay, in
// order or (Reorder) final first, some (Duplicate) twice. It runs on its own goroutine and
// stops when the simulator closes.
func (s *Sim) sendReceipts(provider string, steps []receiptPost) {
	delay, reorder, dups := s.dice.receiptDraws(s.cfg.Receipts, len(steps))
	if !s.wait(delay) {
		return
	}
	if reorder {
		steps[0], steps[len(steps)-1] = steps[len(steps)-1], steps[0]
	}
	for i, p := range steps {
		for range 1 + dups[i] {
			if !s.postReceipt(provider, p) {
				return
			}
		}
	}
}

// postReceipt posts p until herald answers 2xx or 4xx (a 403 is final: the signature will
// not get better), at most receiptTries times; false when the simulator is closing.
func (s *Sim) postReceipt(provider string, p receiptPost) bool {
	backoff := 500 * time.Millisecond
	for try := 0; try < receiptTries; try++ {
		status := s.postOnce(p)
		s.records.add(Record{Provider: provider + ".receipt", Key: receiptKey(p), ReceivedAt: time.Now(),
			Outcome: ReceiptOutcome, Status: status})
		if status >= 200 && status < 500 {
			return true
		}
		if !s.wait(backoff) {
			return false
		}
		backoff *= 2
	}
	return true
}

func (s *Sim) postOnce(p receiptPost) int {
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(p.body))
	if err != nil {
		return 0
	}
	for k, v := range p.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", p.contentType)
	resp, err := s.receiptClient.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// receiptKey is the delivery id a receipt names, for its record.
func receiptKey(p receiptPost) string {
	if u, err := url.Parse(p.url); err == nil && u.Query().Get(receipts.DeliveryIDParam) != "" {
		return u.Query().Get(receipts.DeliveryIDParam)
	}
	if form, err := url.ParseQuery(string(p.body)); err == nil && form.Get("client-ref") != "" {
		return form.Get("client-ref")
	}
	if i := bytes.Index(p.body, []byte(`"herald_delivery_id":"`)); i >= 0 {
		rest := string(p.body[i+len(`"herald_delivery_id":"`):])
		return rest[:max(strings.IndexByte(rest, '"'), 0)]
	}
	return ""
}

// wait sleeps d; false when the simulator closes first.
func (s *Sim) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}

// receiptDraws draws one message's receipt delay, whether its receipts go out of order and
// how many extra copies of each of its n receipts are sent.
func (d *dice) receiptDraws(rc *Receipts, n int) (time.Duration, bool, []int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dups := make([]int, n)
	for i := range dups {
		if d.rng.Float64() < rc.Duplicate {
			dups[i] = 1
		}
	}
	return d.delay(rc.Delay), d.rng.Float64() < rc.Reorder, dups
}

// delivered draws whether an accepted message's final receipt says delivered.
func (d *dice) delivered(rc *Receipts) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.Float64() < rc.Delivered
}
