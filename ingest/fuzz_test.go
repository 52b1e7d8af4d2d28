package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/recipient"
)

// FuzzDecodeNotification sends arbitrary bodies to POST /api/notifications on a real
// database. Whatever the body, the answer is never a 5xx, and a rejected body writes
// nothing. The seeds run in every `go test`; `go test -fuzz FuzzDecodeNotification
// ./ingest` explores further.
func FuzzDecodeNotification(f *testing.F) {
	// The fuzz target may not log through f: the API logs nowhere.
	unrecorded(f)
	e := newEnvWith(f, Config{}, zap.NewNop())
	e.template("otp", "security", "PUSH", "EMAIL", "SMS", "WEBHOOK")
	e.user(42, map[string]any{
		"email": "u42@example.com", "phone": "+15551230042", "webhookUrl": "https://example.com/h",
		"pushTokens": []map[string]any{{"token": "tok", "platform": "FCM"}},
	})
	// The handler itself, not the env's server checked against docs/openapi.yaml: the fuzzer
	// finds bodies the decoder takes that no schema can say (members matched
	// case-insensitively), and the seeds' templates and users went through the checked server.
	h := e.api.Handler()

	for _, seed := range []string{
		`{"userId":42,"template":"otp","channels":["SMS"]}`,
		`{"userId":42,"template":"otp","channels":["SMS","EMAIL","PUSH","WEBHOOK"],"priority":"HIGH","payload":{"code":"123456","n":[1,2.5,-3e10,true,null]},"category":"security"}`,
		`{"userId":42,"template":"otp","channels":["EMAIL"],"sendAt":"2030-01-01T00:00:00Z","expiresAt":"2030-01-02T00:00:00+02:00"}`,
		`{"userId":42,"template":"otp","channels":["SMS"],"to":{"phone":"+15551234567","email":"a@b.example","webhookUrl":"https://x.example/","pushTokens":[{"token":"t","platform":"APNS"}]}}`,
		`{"userId":42,"template":"missing","channels":["SMS"]}`,
		`{"userId":0,"template":"otp","channels":[]}`,
		`{"userId":42,"template":"otp","channels":["SMS"],"payload":{"s":"\u0000"}}`,
		`{"userId":42,"template":"otp","channels":["SMS"],"payload":{"n":1e999999}}`,
		`{"userId":42,"template":"otp","channels":["SMS"],"payload":{"s":"\ud800"}}`,
		`{"userId":42,"template":"otp","channels":["SMS"],"payload":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		`{"userId":42,"template":"otp","channels":["SMS"],"sendAt":"0000-01-01T00:00:00Z"}`,
		`{"userId":42,"template":"otp","channels":["SMS"],"expiresAt":"9999-12-31T23:59:59.999999999Z"}`,
		`{"userId":42,"template":"otp\u0000","channels":["SMS"]}`,
		`{"userId":42,"template":"otp","channels":["SMS"],"category":"a\u0000"}`,
		`{"userId":42,"USERID":43,"template":"otp","channels":["SMS"]}`,
		`{"userId":1e2,"template":"otp","channels":["SMS"]}`,
		`{"userId":42,"template":"otp","channels":["SMS"]}{}`,
		`[1,2,3]`, `null`, `"x"`, `{`, ``, "\xff\xfe",
	} {
		f.Add([]byte(seed))
	}

	var seq int
	f.Fuzz(func(t *testing.T, body []byte) {
		seq++
		n0, d0 := countRows(t, e)
		req := httptest.NewRequest(http.MethodPost, "/api/notifications", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "fuzz-"+strconv.Itoa(seq))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		require.Less(t, rec.Code, 500, "body %q: %s", body, rec.Body)
		n1, d1 := countRows(t, e)
		if rec.Code != http.StatusAccepted {
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
			var p problem
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
			require.NotEmpty(t, p.Code)
			require.Equal(t, rec.Code, p.Status)
			require.Equal(t, n0, n1, "rejected body %q wrote a notification", body)
			require.Equal(t, d0, d1, "rejected body %q wrote a delivery", body)
			return
		}
		var a recipient.Accepted
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a))
		require.Equal(t, n0+1, n1)
		require.Equal(t, d0+len(a.Deliveries), d1)
	})
}

func countRows(t *testing.T, e *env) (notifications, deliveries int) {
	t.Helper()
	err := e.pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM notification), (SELECT count(*) FROM delivery)`).Scan(&notifications, &deliveries)
	require.NoError(t, err)
	return notifications, deliveries
}
