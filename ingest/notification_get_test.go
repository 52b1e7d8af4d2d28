package ingest

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGetNotificationStatus reads back deliveries in several states, as dispatch leaves them.
func TestGetNotificationStatus(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS", "EMAIL")
	e.user(3, map[string]any{"email": "u3@example.com", "phone": "+15551230003"})
	a := e.accepted("k", `{"userId":3,"template":"otp","channels":["SMS","EMAIL"],"payload":{"code":"42"},"sendAt":"2030-01-01T00:00:00+01:00"}`)

	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `UPDATE delivery SET status = 'SENT', attempts = 1, sent_at = now()
		WHERE notification_id = $1 AND channel = 'SMS' AND status = 'PENDING'`, a["id"])
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE delivery SET attempts = 2, last_error = 'smtp 451 try later'
		WHERE notification_id = $1 AND channel = 'EMAIL' AND status = 'PENDING'`, a["id"])
	require.NoError(t, err)

	res := e.do(http.MethodGet, "/api/notifications/"+a["id"].(string), nil, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	n := res.json(t)
	require.Equal(t, a["id"], n["id"])
	require.Equal(t, float64(3), n["userId"])
	require.Equal(t, "otp", n["template"])
	require.Equal(t, map[string]any{"code": "42"}, n["payload"])
	require.Equal(t, "2029-12-31T23:00:00Z", n["sendAt"])
	require.Nil(t, n["expiresAt"])
	require.Equal(t, []any{}, n["suppressed"])

	ds := n["deliveries"].([]any)
	require.Len(t, ds, 2)
	email, sms := ds[0].(map[string]any), ds[1].(map[string]any)
	require.Equal(t, "EMAIL", email["channel"])
	require.Equal(t, "PENDING", email["status"])
	require.Equal(t, float64(2), email["attempts"])
	require.Equal(t, "smtp 451 try later", email["lastError"])
	require.Equal(t, "2029-12-31T23:00:00Z", email["nextAttemptAt"])
	require.Nil(t, email["sentAt"])

	require.Equal(t, "SMS", sms["channel"])
	require.Equal(t, "SENT", sms["status"])
	require.Equal(t, float64(1), sms["attempts"])
	require.Nil(t, sms["nextAttemptAt"], "a final delivery has no next attempt")
	require.NotNil(t, sms["sentAt"])
	require.Equal(t, a["deliveries"].([]any)[1].(map[string]any)["id"], sms["id"])
}
