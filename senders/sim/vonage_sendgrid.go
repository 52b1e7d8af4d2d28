package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// vonageAnswer is the SMS API's answer for one single-part message with status st.
func vonageAnswer(st int, key, to string) map[string]any {
	p := map[string]string{"to": to, "status": strconv.Itoa(st), "client-ref": key}
	if st == 0 {
		p["message-id"] = fmt.Sprintf("%016X", messageSeq.Add(1))
		p["remaining-balance"], p["message-price"], p["network"] = "10.00000000", "0.03330000", "23410"
	} else {
		p["error-text"] = map[int]string{1: "Throughput Rate Exceeded - please wait [ 1000 ] and retry",
			2: "Missing Parameters", 4: "Bad Credentials", 6: "Invalid Message"}[st]
	}
	return map[string]any{"message-count": "1", "messages": []map[string]string{p}}
}

// vonageProtocol is the Vonage SMS API (POST /sms/json). Like Vonage, it answers its own
// errors with HTTP 200 and a per-message status: 2 for a missing field, 4 without
// credentials (api_key and api_secret, any values), 1 when rate limited, 6 for a rejected
// recipient; 503 (with Retry-After) when unavailable. The idempotency key is client-ref.
func vonageProtocol() protocol {
	return protocol{name: Vonage,
		key: func(_ *http.Request, body []byte) (string, int, string) {
			form, err := url.ParseQuery(string(body))
			key := form.Get("client-ref")
			problem := func(st int) (string, int, string) {
				b, _ := json.Marshal(vonageAnswer(st, key, form.Get("to")))
				return key, http.StatusOK, string(b)
			}
			switch {
			case err != nil || form.Get("to") == "" || form.Get("from") == "" || form.Get("text") == "":
				return problem(2)
			case form.Get("api_key") == "" || form.Get("api_secret") == "":
				return problem(4)
			}
			return key, 0, ""
		},
		answer: func(w http.ResponseWriter, r *http.Request, o Outcome, ra time.Duration) {
			b, _ := io.ReadAll(r.Body)
			form, _ := url.ParseQuery(string(b))
			key, to := form.Get("client-ref"), form.Get("to")
			switch o {
			case Accepted:
				writeJSON(w, http.StatusOK, vonageAnswer(0, key, to))
			case RateLimited:
				writeJSON(w, http.StatusOK, vonageAnswer(1, key, to))
			case Rejected:
				writeJSON(w, http.StatusOK, vonageAnswer(6, key, to))
			case Unavailable:
				setRetryAfter(w, o, ra)
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		},
	}
}

// sendGridProtocol is SendGrid's v3 Mail Send (POST /v3/mail/send): a bearer key (any
// value), a body with a recipient, a from address and content, or 401/400 with SendGrid's
// errors array. 202 with X-Message-Id when accepted; 429 with X-RateLimit-Reset (and a
// Retry-After, which SendGrid itself does not send, so that an injected delay is exact);
// 503 with Retry-After; 400 for a rejected recipient. The key is custom_args'
// herald_delivery_id.
func sendGridProtocol() protocol {
	errorsBody := func(field, message string) string {
		b, _ := json.Marshal(map[string]any{"errors": []map[string]any{{"field": field, "message": message, "help": nil}}})
		return string(b)
	}
	return protocol{name: SendGrid,
		key: func(r *http.Request, body []byte) (string, int, string) {
			var m struct {
				Personalizations []struct {
					To []struct {
						Email string `json:"email"`
					} `json:"to"`
				} `json:"personalizations"`
				From struct {
					Email string `json:"email"`
				} `json:"from"`
				Content []struct {
					Type  string `json:"type"`
					Value string `json:"value"`
				} `json:"content"`
				CustomArgs map[string]string `json:"custom_args"`
			}
			err := json.Unmarshal(body, &m)
			key := m.CustomArgs["herald_delivery_id"]
			switch {
			case !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "):
				return key, http.StatusUnauthorized, errorsBody("", "The provided authorization grant is invalid, expired, or revoked")
			case err != nil:
				return key, http.StatusBadRequest, errorsBody("", "Bad Request")
			case len(m.Personalizations) == 0 || len(m.Personalizations[0].To) == 0 || m.Personalizations[0].To[0].Email == "":
				return key, http.StatusBadRequest, errorsBody("personalizations.0.to", "The to array is required for all personalization objects, and must have at least one email object with a valid email address.")
			case m.From.Email == "":
				return key, http.StatusBadRequest, errorsBody("from.email", "The from object must be provided for every email send.")
			case len(m.Content) == 0:
				return key, http.StatusBadRequest, errorsBody("content", "Unless a valid template_id is provided, the content parameter is required.")
			}
			return key, 0, ""
		},
		answer: func(w http.ResponseWriter, _ *http.Request, o Outcome, ra time.Duration) {
			switch o {
			case Accepted:
				w.Header().Set("X-Message-Id", fmt.Sprintf("sim%019d", messageSeq.Add(1)))
				w.WriteHeader(http.StatusAccepted)
			case RateLimited:
				reset := time.Now().Add(ra)
				w.Header().Set("X-RateLimit-Limit", "600")
				w.Header().Set("X-RateLimit-Remaining", "0")
				w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(int64(math.Ceil(float64(reset.UnixNano())/1e9)), 10))
				setRetryAfter(w, o, ra)
				writeJSON(w, http.StatusTooManyRequests, json.RawMessage(errorsBody("", "too many requests")))
			case Unavailable:
				setRetryAfter(w, o, ra)
				w.WriteHeader(http.StatusServiceUnavailable)
			case Rejected:
				writeJSON(w, http.StatusBadRequest, json.RawMessage(errorsBody("personalizations.0.to.0.email", "Does not contain a valid address.")))
			}
		},
	}
}
