package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/senders/sendertest"
	"github.com/heraldhq/herald/senders/sim"
)

// clearHeraldEnv unsets every HERALD_* variable for the test (the stack's env, mailpit's SMTP
// address among them, must not decide what these tests build); they come back after it.
func clearHeraldEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HERALD_") {
			t.Setenv(k, v) // restores it when the test ends
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

func parseSenderFlags(t *testing.T, args ...string) (*senderFlags, *envFlags) {
	t.Helper()
	var s senderFlags
	f := newFlags("serve")
	s.register(f)
	require.NoError(t, f.Parse(args))
	return &s, f
}

// The simulator's env file must name real serve flags, and build a sender for every channel.
func TestSimEnvBuildsEverySender(t *testing.T) {
	clearHeraldEnv(t)
	dir := t.TempDir()
	c := simConfig{cfg: sim.Config{Addr: "127.0.0.1:0", TLSAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0",
		CertFile: dir + "/sim.pem", WebhookSecret: sendertest.WebhookSecret}, dir: dir}
	s, err := sim.New(c.cfg, zap.NewNop())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.NoError(t, s.WriteDevCredentials(dir))

	env := simServeEnv(s, c)
	var serve serveConfig
	f := newFlags("serve")
	serve.register(f)
	for k, v := range env {
		if strings.HasPrefix(k, "HERALD_SIM_") {
			continue // for people and tests, not for serve
		}
		name := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "HERALD_")), "_", "-")
		require.NotNil(t, f.Lookup(name), "%s names no serve flag", k)
		t.Setenv(k, v)
	}
	sf, _ := parseSenderFlags(t)
	core, logs := observer.New(zap.InfoLevel)
	snd, closeAll, err := sf.build(zap.New(core), sendertest.WebhookSecrets(nil))
	require.NoError(t, err)
	defer closeAll()
	got := map[herald.Channel]string{}
	for ch, s := range snd {
		got[ch] = s.Provider()
	}
	require.Equal(t, map[herald.Channel]string{herald.ChannelPush: "push", herald.ChannelEmail: "email:smtp",
		herald.ChannelSMS: "sms:twilio", herald.ChannelWebhook: "webhook"}, got)
	for _, e := range logs.All() {
		for _, v := range e.ContextMap() {
			s, _ := v.(string)
			require.NotContains(t, s, sendertest.WebhookSecret)
			require.NotContains(t, s, simTwilioToken)
		}
	}

	b, err := json.Marshal(parseEnvFile([]byte("export A='x'\\''y'\n# c\nexport B='p q'\n")))
	require.NoError(t, err)
	require.JSONEq(t, `{"A": "x'y", "B": "p q"}`, string(b))
}

func TestSecretFlagsAreNeverPrinted(t *testing.T) {
	clearHeraldEnv(t)
	t.Setenv("HERALD_TWILIO_AUTH_TOKEN", "env-token-123")
	s, f := parseSenderFlags(t, "--smtp-password", "flag-password-456")
	require.Equal(t, "env-token-123", s.Twilio.Password)
	require.Equal(t, "flag-password-456", s.SMTP.Password)
	var usage bytes.Buffer
	f.SetOutput(&usage)
	f.PrintDefaults()
	require.Contains(t, usage.String(), "HERALD_TWILIO_AUTH_TOKEN")
	require.NotContains(t, usage.String(), "env-token-123")
	require.NotContains(t, usage.String(), "flag-password-456")
}

func TestBuildSenderModes(t *testing.T) {
	clearHeraldEnv(t)
	s, _ := parseSenderFlags(t)
	snd, closeAll, err := s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.NoError(t, err)
	closeAll()
	require.Len(t, snd, len(herald.Channels))
	require.IsType(t, dispatch.LogSender{}, snd[herald.ChannelSMS])

	s, _ = parseSenderFlags(t, "--senders", "carrier-pigeon")
	_, _, err = s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.ErrorContains(t, err, "--senders")

	s, _ = parseSenderFlags(t, "--senders", "providers")
	_, _, err = s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.ErrorContains(t, err, "no provider is configured")

	// Only webhooks: WEBHOOK gets its sender, the other channels are reported.
	s, _ = parseSenderFlags(t, "--senders", "providers", "--webhook-enabled")
	core, logs := observer.New(zap.InfoLevel)
	snd, closeAll, err = s.build(zap.New(core), sendertest.WebhookSecrets(nil))
	require.NoError(t, err)
	closeAll()
	require.Len(t, snd, 1)
	require.Equal(t, "webhook", snd[herald.ChannelWebhook].Provider())
	require.Equal(t, 3, logs.FilterMessage("no sender: deliveries of this channel end FAILED").Len())

	s, _ = parseSenderFlags(t, "--senders", "providers", "--smtp-addr", "no-port", "--smtp-from", "a@b.c")
	_, _, err = s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.ErrorContains(t, err, "--smtp-addr")
	s, _ = parseSenderFlags(t, "--senders", "providers", "--fcm-credentials-file", t.TempDir()+"/missing.json")
	_, _, err = s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.ErrorContains(t, err, "--fcm-credentials-file")
}
