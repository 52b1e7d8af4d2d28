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

// A receiver verifies every webhook before trusting it, and dedupes on Idempotency-Key.
func ExampleVerify() {
	secret := []byte("whsec-shared-with-herald")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secret, r.Header.Get(webhook.HeaderSignature), body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// ... skip if r.Header.Get("Idempotency-Key") was already processed ...
		w.WriteHeader(http.StatusNoContent)
	})

	body := `{"event":"otp"}`
	req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	req.Header.Set(webhook.HeaderSignature, webhook.Sign(secret, time.Now(), []byte(body)))
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output: 204
}
