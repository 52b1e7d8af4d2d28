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

// TestGetNotificationAttemptLog: the answer carries the trace id of the accepting request
// and, per delivery, the provider, its message id and one attemptLog entry per attempt
// (started, finished, outcome, provider, providerCode, errorClass); attempts stays the count.
func TestGetNotificationAttemptLog(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS")
	e.user(4, map[string]any{"phone": "+15551230004"})
	const trace = "0af7651916cd43dd8448eb211c80319c"
	res := e.do(http.MethodPost, "/api/notifications", `{"userId":4,"template":"otp","channels":["SMS"]}`,
		map[string]string{"Idempotency-Key": "trace-1", "traceparent": "00-" + trace + "-b7ad6b7169203331-01"})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	a := res.json(t)
	id := a["deliveries"].([]any)[0].(map[string]any)["id"].(string)

	ctx := context.Background()
	att, started, ok, err := delivery.Claim(ctx, e.pool, id, 0)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = delivery.Record(ctx, e.pool, id, att, started, delivery.Outcome{Status: herald.StatusPending,
		AttemptClass: "TRANSIENT", Error: "busy", Provider: "sim-sms", ProviderCode: "503"})
	require.NoError(t, err)
	require.True(t, ok)
	att, started, ok, err = delivery.Claim(ctx, e.pool, id, 1)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = delivery.Record(ctx, e.pool, id, att, started, delivery.Outcome{Status: herald.StatusSent,
		AttemptClass: "SENT", Provider: "sim-sms", ProviderID: "sim-77", ProviderCode: "200"})
	require.NoError(t, err)
	require.True(t, ok)

	got := e.do(http.MethodGet, "/api/notifications/"+a["id"].(string), nil, nil)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	n := got.json(t)
	require.Equal(t, trace, n["traceId"], "the trace the request continued")
	d := n["deliveries"].([]any)[0].(map[string]any)
	require.Equal(t, float64(2), d["attempts"])
	require.Equal(t, "sim-sms", d["provider"])
	require.Equal(t, "sim-77", d["providerMessageId"])
	log := d["attemptLog"].([]any)
	require.Len(t, log, 2)
	first, second := log[0].(map[string]any), log[1].(map[string]any)
	require.ElementsMatch(t, []string{"started", "finished", "outcome", "provider", "providerCode", "errorClass"}, keys(first))
	require.Equal(t, "ERROR", first["outcome"])
	require.Equal(t, "TRANSIENT", first["errorClass"])
	require.Equal(t, "503", first["providerCode"])
	require.Equal(t, "sim-sms", first["provider"])
	require.Equal(t, "SENT", second["outcome"])
	require.Nil(t, second["errorClass"])
	require.Equal(t, "200", second["providerCode"])
	for _, entry := range []map[string]any{first, second} {
		s, err := time.Parse(time.RFC3339Nano, entry["started"].(string))
		require.NoError(t, err)
		f, err := time.Parse(time.RFC3339Nano, entry["finished"].(string))
		require.NoError(t, err)
		require.False(t, f.Before(s), "an attempt finishes after it starts")
	}
	require.NotContains(t, got.body, "busy", "the attempt log carries classes and codes, not error texts")

	// A notification without a trace and without attempts: null trace id, empty attempt log.
	b := e.accepted("trace-2", `{"userId":4,"template":"otp","channels":["SMS"]}`)
	n = e.do(http.MethodGet, "/api/notifications/"+b["id"].(string), nil, nil).json(t)
	require.Contains(t, n, "traceId")
	d = n["deliveries"].([]any)[0].(map[string]any)
	require.Nil(t, d["provider"])
	require.Equal(t, []any{}, d["attemptLog"])
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
