package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/senders/webhook"
)

// BadSignature is the outcome of a webhook whose Standard Webhooks signature does not verify.
const BadSignature Outcome = "bad_signature"

// protocol is how one provider reads a request and words its answers.
type protocol struct {
	name string
	// key extracts the idempotency key; a non-empty problem refuses the request as
	// malformed (with status) before any fault is drawn.
	key func(r *http.Request, body []byte) (key string, status int, problem string)
	// answer writes the response for outcome o (never TimedOut).
	answer func(w http.ResponseWriter, r *http.Request, o Outcome, retryAfter time.Duration)
}

// serveProvider wraps a protocol with fault injection, latency and recording.
func (s *Sim) serveProvider(p protocol) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		received := time.Now()
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body)) // for an answer that echoes the request
		key, status, problem := p.key(r, body)
		if problem != "" {
			s.records.add(Record{Provider: p.name, Key: key, ReceivedAt: received, Outcome: Rejected, Status: status,
				Traceparent: r.Header.Get("traceparent")})
			http.Error(w, problem, status)
			return
		}
		o, delay, retryAfter := s.dice.roll(p.name)
		if p.name == Webhook && s.cfg.WebhookSecret != "" &&
			webhook.Verify(s.cfg.WebhookSecret, r.Header, body, received, 5*time.Minute) != nil {
			o = BadSignature
		}
		rec := Record{Provider: p.name, Key: key, ReceivedAt: received, Outcome: o, DelayMs: float64(delay) / 1e6,
			Traceparent: r.Header.Get("traceparent")}
		if o == TimedOut {
			s.records.add(rec)
			select { // taken, never answered
			case <-r.Context().Done():
			case <-s.closing:
			}
			return
		}
		rec.Status = statusOf(p.name, o)
		s.records.add(rec)
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			case <-s.closing:
				return
			}
		}
		if o == BadSignature {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		p.answer(w, r, o, retryAfter)
		if o == Accepted {
			s.scheduleReceipts(p.name, body, key)
		}
	}
}

// scheduleReceipts starts sending the receipts of an accepted message, if it gets any.
func (s *Sim) scheduleReceipts(provider string, body []byte, key string) {
	rc := s.cfg.Receipts
	if rc == nil {
		return
	}
	steps := s.receiptSteps(provider, body, key, s.dice.delivered(rc))
	if steps == nil {
		return
	}
	select {
	case <-s.closing:
		return
	default:
	}
	s.receipts.Add(1)
	go func() {
		defer s.receipts.Done()
		s.sendReceipts(provider, steps)
	}()
}

// statusOf is the status each provider answers an outcome with.
func statusOf(provider string, o Outcome) int {
	switch o {
	case Accepted:
		switch provider {
		case Twilio:
			return http.StatusCreated
		case SendGrid:
			return http.StatusAccepted
		}
		return http.StatusOK
	case RateLimited:
		if provider == Vonage { // status 1 "Throttled" in a 200 answer
			return http.StatusOK
		}
		return http.StatusTooManyRequests
	case Unavailable:
		return http.StatusServiceUnavailable
	case BadSignature:
		return http.StatusUnauthorized
	case Rejected:
		switch provider {
		case FCM:
			return http.StatusNotFound
		case Twilio, SendGrid:
			return http.StatusBadRequest
		case Vonage: // a non-zero status in a 200 answer
			return http.StatusOK
		}
		return http.StatusGone
	}
	return 0
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func setRetryAfter(w http.ResponseWriter, o Outcome, d time.Duration) {
	if o == RateLimited || o == Unavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
	}
}

var messageSeq atomic.Int64

func fcmProtocol() protocol {
	return protocol{name: FCM,
		key: func(r *http.Request, body []byte) (string, int, string) {
			var req struct {
				Message struct {
					Token string            `json:"token"`
					Data  map[string]string `json:"data"`
				} `json:"message"`
			}
			_ = json.Unmarshal(body, &req)
			key := req.Message.Data["herald_delivery_id"]
			switch {
			case !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "):
				return key, http.StatusUnauthorized, "missing bearer token"
			case req.Message.Token == "":
				return key, http.StatusBadRequest, "message.token is required"
			}
			return key, 0, ""
		},
		answer: func(w http.ResponseWriter, r *http.Request, o Outcome, ra time.Duration) {
			setRetryAfter(w, o, ra)
			fcmErr := func(canonical, code string) map[string]any {
				return map[string]any{"error": map[string]any{"code": statusOf(FCM, o), "status": canonical, "message": code,
					"details": []map[string]string{{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}}}}
			}
			switch o {
			case Accepted:
				writeJSON(w, http.StatusOK, map[string]string{"name": fmt.Sprintf("projects/%s/messages/%d", r.PathValue("project"), messageSeq.Add(1))})
			case RateLimited:
				writeJSON(w, statusOf(FCM, o), fcmErr("RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"))
			case Unavailable:
				writeJSON(w, statusOf(FCM, o), fcmErr("UNAVAILABLE", "UNAVAILABLE"))
			case Rejected:
				writeJSON(w, statusOf(FCM, o), fcmErr("NOT_FOUND", "UNREGISTERED"))
			}
		},
	}
}

func apnsProtocol() protocol {
	return protocol{name: APNs,
		key: func(r *http.Request, _ []byte) (string, int, string) {
			key := r.Header.Get("apns-id")
			if !strings.HasPrefix(strings.ToLower(r.Header.Get("authorization")), "bearer ") {
				return key, http.StatusForbidden, `{"reason":"MissingProviderToken"}`
			}
			if r.Header.Get("apns-topic") == "" {
				return key, http.StatusBadRequest, `{"reason":"MissingTopic"}`
			}
			return key, 0, ""
		},
		answer: func(w http.ResponseWriter, r *http.Request, o Outcome, ra time.Duration) {
			setRetryAfter(w, o, ra)
			w.Header().Set("apns-id", r.Header.Get("apns-id"))
			reason := map[Outcome]string{RateLimited: "TooManyRequests", Unavailable: "ServiceUnavailable", Rejected: "Unregistered"}[o]
			if o == Accepted {
				w.WriteHeader(http.StatusOK)
				return
			}
			writeJSON(w, statusOf(APNs, o), map[string]any{"reason": reason})
		},
	}
}

func twilioProtocol() protocol {
	return protocol{name: Twilio,
		key: func(r *http.Request, body []byte) (string, int, string) {
			key := r.Header.Get("Idempotency-Key")
			form, err := url.ParseQuery(string(body))
			if _, _, ok := r.BasicAuth(); !ok {
				return key, http.StatusUnauthorized, `{"code":20003,"status":401}`
			}
			if err != nil || form.Get("To") == "" || form.Get("Body") == "" {
				return key, http.StatusBadRequest, `{"code":21604,"status":400}`
			}
			return key, 0, ""
		},
		answer: func(w http.ResponseWriter, r *http.Request, o Outcome, ra time.Duration) {
			setRetryAfter(w, o, ra)
			code := map[Outcome]int{RateLimited: 20429, Unavailable: 20503, Rejected: 21211}[o]
			if o == Accepted {
				writeJSON(w, http.StatusCreated, map[string]string{"sid": fmt.Sprintf("SM%032x", messageSeq.Add(1)), "status": "queued"})
				return
			}
			writeJSON(w, statusOf(Twilio, o), map[string]any{"code": code, "status": statusOf(Twilio, o), "message": "simulated"})
		},
	}
}

func webhookProtocol() protocol {
	return protocol{name: Webhook,
		key: func(r *http.Request, _ []byte) (string, int, string) {
			return r.Header.Get(webhook.HeaderIdempotencyKey), 0, ""
		},
		answer: func(w http.ResponseWriter, _ *http.Request, o Outcome, ra time.Duration) {
			setRetryAfter(w, o, ra)
			w.WriteHeader(statusOf(Webhook, o))
		},
	}
}

// serveToken answers the OAuth2 JWT bearer grant with a fixed access token. The assertion's
// signature is not checked: the simulator trusts every service account.
func serveToken(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.PostForm.Get("assertion") == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": "sim-access-token", "token_type": "Bearer", "expires_in": 3600})
}
