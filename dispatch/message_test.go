package dispatch

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

func ptr(s string) *string { return &s }

func TestRecipientOverride(t *testing.T) {
	base := row{ID: "d1", UserID: 7, Channel: herald.ChannelSMS, Email: ptr("stored@example.com"), Phone: ptr("+15550001"),
		PushTokens: json.RawMessage(`[{"token":"tok-a","platform":"APNS"}]`)}

	r := base
	rc, err := r.recipient()
	require.NoError(t, err)
	require.Equal(t, "+15550001", rc.Phone)
	require.Equal(t, []senders.PushToken{{Token: "tok-a", Platform: "APNS"}}, rc.PushTokens)

	r.To = json.RawMessage(`{"phone":"+15559999","pushTokens":["tok-b"]}`)
	rc, err = r.recipient()
	require.NoError(t, err)
	require.Equal(t, "+15559999", rc.Phone, "inline phone overrides the stored one")
	require.Equal(t, "stored@example.com", rc.Email, "fields not overridden stay")
	require.Equal(t, []senders.PushToken{{Token: "tok-b", Platform: "FCM"}}, rc.PushTokens)

	r = base
	r.Channel, r.WebhookURL = herald.ChannelWebhook, nil
	_, err = r.recipient()
	require.ErrorIs(t, err, errNoRecipient)
	r.To = json.RawMessage(`{"webhookUrl":"https://hooks.example.com/x"}`)
	rc, err = r.recipient()
	require.NoError(t, err)
	require.Equal(t, "https://hooks.example.com/x", rc.WebhookURL)
}

func TestDefaultRenderer(t *testing.T) {
	tpl := Template{Name: "otp", Content: json.RawMessage(`{
		"SMS": {"en": {"text": "Your code is {{code}}"}, "default": {"text": "Code: {{code}}"}},
		"EMAIL": {"subject": "Code {{code}}", "text": "n={{n}}"}}`)}
	payload := json.RawMessage(`{"code":"123456","n":3}`)
	r := DefaultRenderer{}

	c, err := r.Render(context.Background(), tpl, "en", herald.ChannelSMS, payload)
	require.NoError(t, err)
	require.Equal(t, "Your code is 123456", c.Text)
	c, err = r.Render(context.Background(), tpl, "de", herald.ChannelSMS, payload)
	require.NoError(t, err)
	require.Equal(t, "Code: 123456", c.Text, "unknown locale falls back to default")
	c, err = r.Render(context.Background(), tpl, "en", herald.ChannelEmail, payload)
	require.NoError(t, err)
	require.Equal(t, "Code 123456", c.Subject)
	require.Equal(t, "n=3", c.Text)
	c, err = r.Render(context.Background(), tpl, "", herald.ChannelWebhook, payload)
	require.NoError(t, err)
	require.JSONEq(t, string(payload), string(c.JSON))
	c, err = r.Render(context.Background(), Template{Name: "bare"}, "", herald.ChannelPush, nil)
	require.NoError(t, err)
	require.Equal(t, "bare", c.Body)

	_, err = r.Render(context.Background(), tpl, "", herald.ChannelSMS, json.RawMessage(`[1]`))
	require.Error(t, err)
}
