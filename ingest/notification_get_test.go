package ingest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
)

// TestGetNotificationStatus reads back deliveries in several states, as dispatch leaves them.
func TestGetNotificationStatus(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS", "EMAIL")
	e.user(3, map[string]any{"email": "u3@example.com", "phone": "+15551230003"})
	a := e.accepted("k", `{"userId":3,"template":"otp","channels":["SMS","EMAIL"],"payload":{"code":"42"},"sendAt":"2030-01-01T00:00:00+01:00"}`)

	// As dispatch leaves them: SMS sent at its first attempt, EMAIL retried after its second.
	ctx := context.Background()
	idOf := map[string]string{}
	for _, d := range a["deliveries"].([]any) {
		idOf[d.(map[string]any)["channel"].(string)] = d.(map[string]any)["id"].(string)
	}
	smsID, emailID := idOf["SMS"], idOf["EMAIL"]
	deliverytest.Place(t, e.pool, []string{smsID}, deliverytest.Spec{Status: herald.StatusSending, Attempts: 1})
	ok, err := delivery.Record(ctx, e.pool, smsID, 1, time.Now(), delivery.Outcome{Status: herald.StatusSent, AttemptClass: "SENT"})
	require.NoError(t, err)
	require.True(t, ok)
	deliverytest.Place(t, e.pool, []string{emailID}, deliverytest.Spec{Status: herald.StatusSending, Attempts: 2})
	ok, err = delivery.Record(ctx, e.pool, emailID, 2, time.Now(), delivery.Outcome{Status: herald.StatusPending,
		AttemptClass: "TRANSIENT", Error: "smtp 451 try later", RetryIn: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)

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
	next, err := time.Parse(time.RFC3339Nano, email["nextAttemptAt"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), next, time.Minute, "the retry's next attempt")
	require.Nil(t, email["sentAt"])

	require.Equal(t, "SMS", sms["channel"])
	require.Equal(t, "SENT", sms["status"])
	require.Equal(t, float64(1), sms["attempts"])
	require.Nil(t, sms["nextAttemptAt"], "a final delivery has no next attempt")
	require.NotNil(t, sms["sentAt"])
	require.Equal(t, smsID, sms["id"])
}
