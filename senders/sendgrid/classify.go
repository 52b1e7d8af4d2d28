package sendgrid

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/senders"
)

// apiErrors is SendGrid's error body: {"errors":[{"message":"...","field":"...","help":...}]}.
type apiErrors struct {
	Errors []struct {
		Message string  `json:"message"`
		Field   *string `json:"field"`
	} `json:"errors"`
}

// classify turns a non-2xx answer of mail/send into a classified error. SendGrid has no
// error codes of its own: the code is the HTTP status.
//
//   - 400 (the request or an address is invalid), 403 (SendGrid refuses this message, e.g. a
//     from address that is not a verified sender identity), 413 (too large) and other 4xx:
//     Permanent. The same request cannot succeed.
//   - 401 (the API key is missing, wrong or revoked): Transient. It is the account's, not
//     the message's: the operator has to fix the key, and retries (or another account) give
//     them the time, as for every provider's rejected credentials.
//   - 429: Transient, after Retry-After when given, else until X-RateLimit-Reset (unix
//     seconds).
//   - 503: Transient, the service refused the request before taking it.
//   - other 5xx (500, a gateway's 502/504): Ambiguous. SendGrid may have queued the message
//     before failing and does not dedupe, so whether to send again is dispatch's per-priority
//     policy.
func classify(status int, body []byte, h http.Header, now time.Time) *senders.Error {
	code := strconv.Itoa(status)
	err := fmt.Errorf("sendgrid http %d%s", status, detail(body))
	switch {
	case status == http.StatusTooManyRequests:
		return senders.TransientError(code, retryAfter(h, now), err)
	case status == http.StatusUnauthorized, status == http.StatusServiceUnavailable:
		return senders.TransientError(code, senders.ParseRetryAfter(h.Get("Retry-After"), now), err)
	case status >= 500:
		e := senders.AmbiguousError(code, fmt.Errorf("%w: the message may have been queued", err))
		e.RetryAfter = senders.ParseRetryAfter(h.Get("Retry-After"), now)
		return e
	case status >= 400:
		return senders.PermanentError(code, err)
	}
	return senders.HTTPStatusError(status, code, 0, err)
}

// retryAfter is Retry-After when given, else the time until X-RateLimit-Reset.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if d := senders.ParseRetryAfter(h.Get("Retry-After"), now); d > 0 {
		return d
	}
	reset, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64)
	if err != nil {
		return 0
	}
	if d := time.Unix(reset, 0).Sub(now); d > 0 {
		return d.Round(time.Second)
	}
	return 0
}

// maxDetail bounds the provider text copied into an error.
const maxDetail = 200

// detail is ": <field>: <message>" of the first error SendGrid listed, with every word that
// holds an "@" replaced (a message may quote an address), at most maxDetail bytes.
func detail(body []byte) string {
	var ae apiErrors
	if json.Unmarshal(body, &ae) != nil || len(ae.Errors) == 0 {
		return ""
	}
	e := ae.Errors[0]
	words := strings.Fields(e.Message)
	for i, w := range words {
		if strings.Contains(w, "@") {
			words[i] = "<address>"
		}
	}
	s := strings.Join(words, " ")
	if e.Field != nil && *e.Field != "" {
		s = *e.Field + ": " + s
	}
	if len(s) > maxDetail {
		s = strings.ToValidUTF8(s[:maxDetail], "") + "…"
	}
	if s == "" {
		return ""
	}
	return ": " + s
}
