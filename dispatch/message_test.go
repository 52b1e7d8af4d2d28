package dispatch

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/templates"
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

// TestDefaultRenderer checks the renderer on senders/templates: locale fallback, HTML
// escaping, the webhook envelope, errors, and the fallback for a template without content.
func TestDefaultRenderer(t *testing.T) {
	ctx := context.Background()
	tpl := Template{Name: "otp", Content: json.RawMessage(`{
		"SMS": {"default": {"text": "Code {{.code}}"}, "ja": {"text": "コード {{.code}}"}},
		"EMAIL": {"default": {"subject": "S", "html": "<b>{{.code}}</b>"}}}`)}
	payload := json.RawMessage(`{"code": "<1>"}`)
	var r Renderer = DefaultRenderer{}

	c, err := r.Render(ctx, tpl, "ja-JP", herald.ChannelSMS, payload)
	require.NoError(t, err)
	require.Equal(t, "コード <1>", c.Text)
	c, err = r.Render(ctx, tpl, "", herald.ChannelEmail, payload)
	require.NoError(t, err)
	require.Equal(t, "<b>&lt;1&gt;</b>", c.HTML)

	c, err = r.Render(ctx, tpl, "", herald.ChannelWebhook, payload)
	require.NoError(t, err, "a webhook without template JSON is sent as the envelope")
	require.Empty(t, c.JSON)
	_, err = r.Render(ctx, tpl, "", herald.ChannelPush, payload)
	require.ErrorContains(t, err, "otp")
	_, err = r.Render(ctx, tpl, "", herald.ChannelSMS, json.RawMessage(`{}`))
	require.Error(t, err, "a missing variable fails the render")

	for _, content := range []string{``, `null`, `{}`} {
		c, err = r.Render(ctx, Template{Name: "bare", Content: json.RawMessage(content)}, "", herald.ChannelSMS, payload)
		require.NoError(t, err)
		require.Equal(t, "bare", c.Text, "a template without content renders its name")
	}
	c, err = r.Render(ctx, Template{Name: "bare"}, "", herald.ChannelWebhook, payload)
	require.NoError(t, err)
	require.JSONEq(t, string(payload), string(c.JSON))
}

// TestDefaultRendererIsBounded renders a template stored before the limits existed, the
// bomb of the security review (swapped in after the notification was accepted): it fails at
// once instead of never returning.
func TestDefaultRendererIsBounded(t *testing.T) {
	bomb := Template{Name: "bomb", Content: json.RawMessage(`{"SMS":{"default":{"text":"{{range 9000000000000000000}}{{printf \"%0900000d\" 0}}{{end}}"}}}`)}
	_, err := DefaultRenderer{}.Render(context.Background(), bomb, "", herald.ChannelSMS, nil)
	require.ErrorIs(t, err, templates.ErrNotAllowed)
}
