package ingest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A sendAt at the very end of year 9999, pushed by quiet hours into year 10000, used to be
// accepted and then make every GET of the notification fail. Times at or after
// 9999-01-01T00:00:00Z are refused at accept, with nothing written; the last accepted times,
// shifted by quiet hours, still read back.
func TestTimestampWindow(t *testing.T) {
	e := newEnv(t)
	e.template("digest", "news", "EMAIL")
	e.user(8, map[string]any{"email": "u8@example.com", "timeZone": "UTC"})
	res := e.do(http.MethodPut, "/api/users/8/preferences", map[string]any{
		"quietHours": map[string]any{"start": "23:00", "end": "07:00"},
	}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	n0, d0 := e.rows()

	for i, tc := range []struct{ field, body string }{
		{"sendAt", `{"userId":8,"template":"digest","channels":["EMAIL"],"priority":"NORMAL","sendAt":"9999-12-31T23:30:00Z"}`},
		{"sendAt", `{"userId":8,"template":"digest","channels":["EMAIL"],"priority":"LOW","sendAt":"9999-01-01T00:00:00Z"}`},
		{"sendAt", `{"userId":8,"template":"digest","channels":["EMAIL"],"priority":"LOW","sendAt":"9998-12-31T23:00:00-01:00"}`},
		{"expiresAt", `{"userId":8,"template":"digest","channels":["EMAIL"],"expiresAt":"9999-12-31T23:59:59Z"}`},
		{"sendAt", `{"userId":8,"template":"digest","channels":["EMAIL"],"sendAt":"1999-12-31T23:59:59Z"}`},
	} {
		res := e.do(http.MethodPost, "/api/notifications", tc.body, map[string]string{"Idempotency-Key": "late-" + itoa(int64(i))})
		p := requireProblem(t, res, http.StatusBadRequest, codeValidationFailed)
		require.Contains(t, fields(p), tc.field, "%s", tc.body)
	}
	n, d := e.rows()
	require.Equal(t, n0, n, "a rejected request wrote a notification")
	require.Equal(t, d0, d, "a rejected request wrote a delivery")

	a := e.accepted("last", `{"userId":8,"template":"digest","channels":["EMAIL"],"priority":"NORMAL","sendAt":"9998-12-31T23:59:59Z","expiresAt":"9998-12-31T23:59:59.5Z"}`)
	require.Equal(t, utc("9999-01-01T07:00:00Z"), e.nextAttempt(a["id"]), "quiet hours still apply")
	got := e.do(http.MethodGet, "/api/notifications/"+a["id"].(string), nil, nil)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
}
