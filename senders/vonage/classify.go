package vonage

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/heraldhq/herald/senders"
)

// statusInfo is what herald makes of one of Vonage's per-message status codes.
type statusInfo struct {
	class senders.Class
	what  string
}

// statuses are the SMS API's published per-message status codes (Vonage's "SMS API error
// codes" list). A non-zero status means the message was not queued for sending, so no
// status here is Ambiguous:
//
//   - Permanent: the recipient or the message itself is refused; the same message to the
//     same number through this account cannot succeed.
//   - Transient: throughput and capacity (1, 10), or the account (credentials, suspension,
//     credit, provisioning, signing, the callback URL herald builds from --public-url). As
//     for every provider, an account problem is Transient: the recipient is fine, the
//     operator has to fix the account, and retries (or another account) give them the time.
var statuses = map[int]statusInfo{
	1:  {senders.Transient, "throttled"},
	2:  {senders.Permanent, "missing parameters"},
	3:  {senders.Permanent, "invalid parameters"},
	4:  {senders.Transient, "invalid credentials"},
	5:  {senders.Transient, "internal error"},
	6:  {senders.Permanent, "invalid message (e.g. unrecognised number prefix)"},
	7:  {senders.Permanent, "number barred"},
	8:  {senders.Transient, "partner account barred"},
	9:  {senders.Transient, "partner quota violation (no credit)"},
	10: {senders.Transient, "too many existing binds"},
	11: {senders.Transient, "account not enabled for HTTP"},
	12: {senders.Permanent, "message too long"},
	14: {senders.Transient, "invalid signature"},
	15: {senders.Permanent, "invalid sender address for this destination"},
	22: {senders.Permanent, "invalid network code"},
	23: {senders.Transient, "invalid callback url"},
	29: {senders.Permanent, "non-whitelisted destination (demo account)"},
	32: {senders.Transient, "signature and api secret disallowed"},
	33: {senders.Permanent, "number de-activated"},
}

// classifyStatus turns a non-zero per-message status into a classified error. A status
// Vonage has not published is Transient: it still means "not queued", so a retry cannot
// duplicate the message, while a Permanent guess could drop an OTP for good.
func classifyStatus(status int) *senders.Error {
	code := strconv.Itoa(status)
	info, ok := statuses[status]
	if !ok {
		return senders.TransientError(code, 0, fmt.Errorf("vonage status %d: not queued (unknown status)", status))
	}
	err := fmt.Errorf("vonage status %d: %s", status, info.what)
	switch info.class {
	case senders.Permanent:
		return senders.PermanentError(code, err)
	default:
		return senders.TransientError(code, 0, err)
	}
}

// classifyHTTP turns a non-2xx response into a classified error. The SMS API reports its own
// errors in a 200 answer; a 429 (request rate) and a 503 (the service refuses to handle the
// request) come before any message is queued: Transient. Any other 5xx (500, a gateway's
// 502/504) may hide a queued message, as for Twilio: Ambiguous, and whether to try again is
// dispatch's per-priority policy. 401/403 are the account's: Transient. Other statuses
// follow the generic rule.
func classifyHTTP(status int, retryAfter time.Duration) *senders.Error {
	code := strconv.Itoa(status)
	switch {
	case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable,
		status == http.StatusUnauthorized, status == http.StatusForbidden:
		return senders.TransientError(code, retryAfter, fmt.Errorf("vonage http %d", status))
	case status >= 500:
		e := senders.AmbiguousError(code, fmt.Errorf("vonage http %d: the message may have been queued", status))
		e.RetryAfter = retryAfter
		return e
	}
	return senders.HTTPStatusError(status, code, retryAfter, fmt.Errorf("vonage http %d", status))
}
