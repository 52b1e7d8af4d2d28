package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/stacktest"
)

// A channel whose flag lists two providers is routed by health; one not listed is served by
// its primary, as before routing; a channel with one provider keeps its sender.
func TestRoutingSenders(t *testing.T) {
	rdb, prefix := stacktest.Redis(t)
	tw := &dispatch.MemorySender{ProviderName: "sms:twilio"}
	vo := &dispatch.MemorySender{ProviderName: "sms:vonage"}
	smtp := &dispatch.MemorySender{ProviderName: "email:smtp"}
	sg := &dispatch.MemorySender{ProviderName: "email:sendgrid"}
	wh := &dispatch.MemorySender{ProviderName: "webhook"}
	routes := map[herald.Channel][]route{
		herald.ChannelSMS:     {{Name: "twilio", Weight: 100, Sender: tw}, {Name: "vonage", Weight: 0, Sender: vo}},
		herald.ChannelEmail:   {{Name: "smtp", Weight: 100, Sender: smtp}, {Name: "sendgrid", Weight: 0, Sender: sg}},
		herald.ChannelWebhook: {{Name: "webhook", Weight: 100, Sender: wh}},
	}
	var r routeFlags
	out, rt, err := r.senders(routes, map[herald.Channel]bool{herald.ChannelSMS: true}, rdb, prefix, zap.NewNop())
	require.NoError(t, err)
	require.NotNil(t, rt)
	router := rt
	t.Cleanup(func() { _ = router.Close() })
	_, routed := out[herald.ChannelSMS].(dispatch.RoutedSender)
	require.True(t, routed, "SMS is listed with two providers")
	require.Same(t, smtp, out[herald.ChannelEmail], "EMAIL is not listed: its primary")
	require.Same(t, wh, out[herald.ChannelWebhook])

	out, rt, err = r.senders(routes, nil, rdb, prefix, zap.NewNop())
	require.NoError(t, err)
	require.Nil(t, rt, "nothing listed, nothing routed")
	require.Same(t, tw, out[herald.ChannelSMS])
}
