package webhook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/heraldhq/herald/senders/webhook"
)

// A receiver verifies every webhook before trusting it, with the secret `herald apikey
// create` printed for its API client, and drops a webhook-id it has already processed.
// Any Standard Webhooks library verifies the same way.
func ExampleVerify() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secret, r.Header, body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// ... skip if r.Header.Get("webhook-id") was already processed ...
		w.WriteHeader(http.StatusNoContent)
	})

	body := `{"event":"otp"}`
	now := time.Now()
	sig, _ := webhook.Sign([]string{secret}, "msg_1", now, []byte(body))
	req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	req.Header.Set(webhook.HeaderWebhookID, "msg_1")
	req.Header.Set(webhook.HeaderWebhookTimestamp, fmt.Sprint(now.Unix()))
	req.Header.Set(webhook.HeaderWebhookSignature, sig)
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output: 204
}
