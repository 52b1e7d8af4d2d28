package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/senders/sim"
)

// TestEndToEndThroughVonageAndSendGrid serves SMS through Vonage and EMAIL through SendGrid
// (Twilio a standby, SMTP left out) on an installation that delivers only those two
// channels: every delivery reaches the simulated Vonage or SendGrid once under its delivery
// id and records the account and the provider's message id; a PUSH channel is suppressed
// channel_unavailable, and a request for PUSH alone is refused with nothing written.
func TestEndToEndThroughVonageAndSendGrid(t *testing.T) {
	t.Parallel()
	const users, n = 2, 6
	e := newE2EWith(t, users, []string{"--sms-providers", "twilio=0,vonage=100", "--email-providers", "sendgrid",
		"--channels", "SMS,EMAIL"})

	sent := e.post(t, "vs", n, users, "SMS", "EMAIL")
	e.waitAllFinal(t, len(sent), 60*time.Second)
	require.Equal(t, map[string]int{"SENT": len(sent)}, e.counts(t))
	got := delivered(e.sim.records(t))
	want := map[string]string{"SMS": sim.Vonage, "EMAIL": sim.SendGrid}
	account := map[string]string{"SMS": "sms:vonage", "EMAIL": "email:sendgrid"}
	for _, d := range sent {
		require.Equal(t, 1, got[want[d.Channel]][d.ID], "%s delivery %s at %s", d.Channel, d.ID, want[d.Channel])
		var provider, messageID string
		require.NoError(t, e.pool.QueryRow(context.Background(),
			`SELECT provider, provider_message_id FROM delivery WHERE id = $1`, d.ID).Scan(&provider, &messageID))
		require.Equal(t, account[d.Channel], provider)
		require.NotEmpty(t, messageID)
	}
	require.Empty(t, got[sim.Twilio], "the standby got no traffic")
	require.Empty(t, got[sim.SMTP], "the provider left out of --email-providers got none")

	// PUSH has no provider here: suppressed among others, refused alone.
	status, b, err := tryJSON(context.Background(), http.MethodPost, "http://"+e.addr+"/api/notifications", e.key, "push-sms",
		`{"userId": 1, "template": "otp", "channels": ["PUSH", "SMS"], "payload": {"code": "123456"}}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status, "%s", b)
	var ans struct {
		Deliveries []delivery
		Suppressed []struct{ Channel, Reason string }
	}
	require.NoError(t, json.Unmarshal(b, &ans))
	require.Len(t, ans.Deliveries, 1)
	require.Equal(t, "SMS", ans.Deliveries[0].Channel)
	require.Equal(t, []struct{ Channel, Reason string }{{"PUSH", "channel_unavailable"}}, ans.Suppressed)

	rows := func() (n int) {
		require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM notification`).Scan(&n))
		return n
	}
	before := rows()
	status, b, err = tryJSON(context.Background(), http.MethodPost, "http://"+e.addr+"/api/notifications", e.key, "push-only",
		`{"userId": 1, "template": "otp", "channels": ["PUSH"], "payload": {"code": "123456"}}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%s", b)
	require.Contains(t, string(b), `"code":"channel_unavailable"`)
	require.Equal(t, before, rows(), "the refused request wrote nothing")
}
