package twilio

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/heraldhq/herald/senders"
)

// apiError is Twilio's error body: {"code":21211,"message":"...","more_info":"...","status":400}.
// Its message quotes the phone number, so it is never copied into an error or a log.
type apiError struct {
	Code   int `json:"code"`
	Status int `json:"status"`
}

// permanentCodes are Twilio errors about the recipient or the message itself: sending the
// same message to the same number again cannot succeed.
var permanentCodes = map[int]string{
	21211: "invalid 'To' number",
	21217: "phone number does not appear valid",
	21265: "'To' number is a short code",
	21408: "permission to send to this region not enabled",
	21602: "message body required",
	21610: "recipient unsubscribed (replied STOP)",
	21612: "cannot route to this number",
	21614: "'To' number is not a mobile number",
	21617: "message body too long",
	21635: "'To' number cannot be reached by this sender",
}

// transientCodes are Twilio errors where a later attempt may succeed and the message was
// certainly not taken.
var transientCodes = map[int]string{
	20003: "authentication failed", // operator error: retrying gives time to fix the credentials
	20429: "too many requests",
}

// classify turns a non-2xx Twilio response into a classified error. A 5xx (Twilio's 20500,
// 20503, a gateway's 502/504) is Ambiguous: the Messages API may have queued the message
// before the error, and an SMS sent twice cannot be taken back, so whether to try again is
// dispatch's per-priority policy (RetryAmbiguous, docs/dispatch.md "Retries"), not the sender's.
func classify(status int, body []byte, retryAfter time.Duration) *senders.Error {
	var ae apiError
	_ = json.Unmarshal(body, &ae)
	code := strconv.Itoa(status)
	if ae.Code != 0 {
		code = strconv.Itoa(ae.Code)
	}
	if what, ok := permanentCodes[ae.Code]; ok {
		return senders.PermanentError(code, fmt.Errorf("twilio error %d (http %d): %s", ae.Code, status, what))
	}
	if status >= 500 {
		e := senders.AmbiguousError(code, fmt.Errorf("twilio error %s (http %d): the message may have been accepted", code, status))
		e.RetryAfter = retryAfter
		return e
	}
	if what, ok := transientCodes[ae.Code]; ok {
		return senders.TransientError(code, retryAfter, fmt.Errorf("twilio error %d (http %d): %s", ae.Code, status, what))
	}
	err := fmt.Errorf("twilio error %s (http %d)", code, status)
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return senders.TransientError(code, retryAfter, err)
	}
	return senders.HTTPStatusError(status, code, retryAfter, err)
}
