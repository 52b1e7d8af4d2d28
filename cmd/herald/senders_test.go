package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
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
	routes, closeAll, err := sf.build(zap.New(core), sendertest.WebhookSecrets(nil))
	require.NoError(t, err)
	defer closeAll()
	got := map[herald.Channel]string{}
	for ch, s := range primaries(routes) {
		got[ch] = s.Provider()
	}
	require.Equal(t, map[herald.Channel]string{herald.ChannelPush: "push", herald.ChannelEmail: "email:smtp",
		herald.ChannelSMS: "sms:twilio", herald.ChannelWebhook: "webhook"}, got)
	require.Equal(t, map[herald.Channel][]string{herald.ChannelPush: {"push=100"}, herald.ChannelWebhook: {"webhook=100"},
		herald.ChannelSMS: {"sms:twilio=100", "sms:vonage=0"}, herald.ChannelEmail: {"email:smtp=100", "email:sendgrid=0"}},
		routeWeights(routes), "Vonage and SendGrid are standbys")
	for _, e := range logs.All() {
		for _, v := range e.ContextMap() {
			s, _ := v.(string)
			for _, secret := range []string{sendertest.WebhookSecret, simTwilioToken, simVonageSecret, simSendGridKey} {
				require.NotContains(t, s, secret)
			}
		}
	}

	b, err := json.Marshal(parseEnvFile([]byte("export A='x'\\''y'\n# c\nexport B='p q'\n")))
	require.NoError(t, err)
	require.JSONEq(t, `{"A": "x'y", "B": "p q"}`, string(b))
}

func TestSecretFlagsAreNeverPrinted(t *testing.T) {
	clearHeraldEnv(t)
	t.Setenv("HERALD_TWILIO_AUTH_TOKEN", "env-token-123")
	t.Setenv("HERALD_VONAGE_API_SECRET", "env-vonage-789")
	t.Setenv("HERALD_VONAGE_SIGNATURE_SECRET", "env-vonage-sig-012")
	s, f := parseSenderFlags(t, "--smtp-password", "flag-password-456", "--sendgrid-api-key", "SG.flag-345")
	require.Equal(t, "env-token-123", s.Twilio.Password)
	require.Equal(t, "flag-password-456", s.SMTP.Password)
	require.Equal(t, "env-vonage-789", s.Vonage.APISecret)
	require.Equal(t, "env-vonage-sig-012", s.VonageSignatureSecret)
	require.Equal(t, "SG.flag-345", s.SendGrid.APIKey)
	var usage bytes.Buffer
	f.SetOutput(&usage)
	f.PrintDefaults()
	for _, v := range []string{"HERALD_TWILIO_AUTH_TOKEN", "HERALD_VONAGE_API_SECRET", "HERALD_VONAGE_SIGNATURE_SECRET", "HERALD_SENDGRID_API_KEY"} {
		require.Contains(t, usage.String(), v)
	}
	for _, secret := range []string{"env-token-123", "flag-password-456", "env-vonage-789", "env-vonage-sig-012", "SG.flag-345"} {
		require.NotContains(t, usage.String(), secret)
	}
}

func TestBuildSenderModes(t *testing.T) {
	clearHeraldEnv(t)
	s, _ := parseSenderFlags(t)
	routes, closeAll, err := s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.NoError(t, err)
	closeAll()
	require.Len(t, routes, len(herald.Channels))
	require.IsType(t, dispatch.LogSender{}, primaries(routes)[herald.ChannelSMS])

	s, _ = parseSenderFlags(t, "--senders", "carrier-pigeon")
	_, _, err = s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.ErrorContains(t, err, "--senders")

	s, _ = parseSenderFlags(t, "--senders", "providers")
	_, _, err = s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.ErrorContains(t, err, "no provider is configured")

	// Only webhooks: WEBHOOK gets its sender, the other channels are reported.
	s, _ = parseSenderFlags(t, "--senders", "providers", "--webhook-enabled")
	core, logs := observer.New(zap.InfoLevel)
	routes, closeAll, err = s.build(zap.New(core), sendertest.WebhookSecrets(nil))
	require.NoError(t, err)
	closeAll()
	require.Len(t, routes, 1)
	require.Equal(t, "webhook", primaries(routes)[herald.ChannelWebhook].Provider())
	require.Equal(t, 3, logs.FilterMessage("no provider: notifications for this channel are suppressed channel_unavailable unless --channels lists it").Len())

	s, _ = parseSenderFlags(t, "--senders", "providers", "--smtp-addr", "no-port", "--smtp-from", "a@b.c")
	_, _, err = s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.ErrorContains(t, err, "--smtp-addr")
	s, _ = parseSenderFlags(t, "--senders", "providers", "--fcm-credentials-file", t.TempDir()+"/missing.json")
	_, _, err = s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
	require.ErrorContains(t, err, "--fcm-credentials-file")
}

// routeWeights lists each channel's routes as account=weight.
func routeWeights(routes map[herald.Channel][]route) map[herald.Channel][]string {
	out := map[herald.Channel][]string{}
	for ch, rs := range routes {
		for _, r := range rs {
			out[ch] = append(out[ch], fmt.Sprintf("%s=%d", r.Account, r.Weight))
		}
	}
	return out
}

// twoOfEach configures both SMS and both EMAIL providers, pointed nowhere (build makes no call).
var twoOfEach = []string{"--senders", "providers",
	"--twilio-account-sid", "AC1", "--twilio-auth-token", "t", "--twilio-from", "+15005550001",
	"--vonage-api-key", "k", "--vonage-api-secret", "s", "--vonage-from", "Herald",
	"--smtp-addr", "127.0.0.1:2525", "--smtp-from", "h@example.com",
	"--sendgrid-api-key", "SG.k", "--sendgrid-from", "h@example.com"}

func TestProviderWeights(t *testing.T) {
	clearHeraldEnv(t)
	build := func(t *testing.T, args ...string) map[herald.Channel][]route {
		s, _ := parseSenderFlags(t, append(slices.Clone(twoOfEach), args...)...)
		routes, closeAll, err := s.build(zap.NewNop(), sendertest.WebhookSecrets(nil))
		require.NoError(t, err)
		t.Cleanup(closeAll)
		return routes
	}
	routes := build(t)
	require.Equal(t, []string{"sms:twilio=100", "sms:vonage=0"}, routeWeights(routes)[herald.ChannelSMS])
	require.Equal(t, "sms:twilio", primaries(routes)[herald.ChannelSMS].Provider())

	routes = build(t, "--sms-providers", "twilio=0,vonage=100", "--email-providers", "sendgrid")
	require.Equal(t, []string{"sms:twilio=0", "sms:vonage=100"}, routeWeights(routes)[herald.ChannelSMS])
	require.Equal(t, "sms:vonage", primaries(routes)[herald.ChannelSMS].Provider())
	require.Equal(t, []string{"email:sendgrid=100"}, routeWeights(routes)[herald.ChannelEmail], "smtp left out: not built")
	require.Equal(t, "email:sendgrid", primaries(routes)[herald.ChannelEmail].Provider())

	// Through the variable as well; a tie goes to the first listed.
	t.Setenv("HERALD_SMS_PROVIDERS", "vonage=60, twilio=60")
	require.Equal(t, "sms:vonage", primaries(build(t))[herald.ChannelSMS].Provider())
}

// A bad provider list stops herald before it connects to anything, naming the flag.
func TestBadProviderFlagsRefuseToStart(t *testing.T) {
	clearHeraldEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sms-providers", "twilio=abc"}, `--sms-providers: weight of twilio "abc" is not a whole number`},
		{[]string{"--sms-providers", "twilio=1.5"}, `--sms-providers: weight of twilio "1.5"`},
		{[]string{"--sms-providers", "twilio=-1"}, `--sms-providers: weight of twilio "-1"`},
		{[]string{"--sms-providers", "twilio=101"}, `--sms-providers: weight of twilio "101"`},
		{[]string{"--sms-providers", "nexmo=100"}, `--sms-providers: unknown provider "nexmo" (want twilio, vonage)`},
		{[]string{"--sms-providers", "smtp"}, `--sms-providers: unknown provider "smtp"`},
		{[]string{"--email-providers", "smtp=100,mailgun=0"}, `--email-providers: unknown provider "mailgun" (want smtp, sendgrid)`},
		{[]string{"--email-providers", "smtp=50,smtp=50"}, `--email-providers: provider "smtp" is listed twice`},
		{[]string{"--sms-providers", "twilio=0,vonage=0"}, `--sms-providers: every provider has weight 0`},
		{[]string{"--twilio-account-sid", "", "--sms-providers", "twilio"}, `--sms-providers: twilio is not configured (--twilio-account-sid)`},
		{[]string{"--channels", "SMS,FAX"}, `--channels: unknown channel "FAX"`},
		{[]string{"--public-url", "herald.example.com"}, `--public-url "herald.example.com"`},
		{[]string{"--public-url", "https://herald.example.com/?x=1"}, `--public-url`},
		{[]string{"--sendgrid-webhook-public-key", "bm90IGEga2V5"}, `--sendgrid-webhook-public-key: not a public key`},
	} {
		args := append(slices.Clone(twoOfEach), "--database-url", "postgres://127.0.0.1:1/none")
		err := runServe(context.Background(), append(args, tc.args...))
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	t.Setenv("HERALD_EMAIL_PROVIDERS", "sendgrid=x")
	require.ErrorContains(t, runServe(context.Background(), twoOfEach), `--email-providers: weight of sendgrid "x"`)
}

func TestChannelsSetting(t *testing.T) {
	clearHeraldEnv(t)
	chans := func(t *testing.T, args ...string) []herald.Channel {
		s, _ := parseSenderFlags(t, args...)
		c, err := s.channels()
		require.NoError(t, err)
		return c
	}
	require.Equal(t, herald.Channels, chans(t), "log mode: every channel")
	require.Equal(t, []herald.Channel{herald.ChannelEmail, herald.ChannelSMS}, chans(t, twoOfEach...))
	require.Equal(t, []herald.Channel{herald.ChannelSMS}, chans(t, "--senders", "providers", "--vonage-api-key", "k"))
	require.Equal(t, []herald.Channel{herald.ChannelSMS, herald.ChannelPush}, chans(t, "--channels", "sms,PUSH"))

	// A dispatch process must have a provider for every listed channel; an API-only one
	// (which sends nothing) takes the list as given.
	s, _ := parseSenderFlags(t, append(slices.Clone(twoOfEach), "--channels", "SMS,PUSH")...)
	require.ErrorContains(t, s.validate(true), "--channels: PUSH has no provider configured")
	require.NoError(t, s.validate(false))

	// Every role gets the setting: an ingest-only serve's API config holds it.
	var c serveConfig
	f := newFlags("serve")
	c.register(f)
	require.NoError(t, f.Parse([]string{"--roles", "ingest", "--senders", "providers", "--channels", "EMAIL"}))
	require.NoError(t, c.validate())
	require.Equal(t, []herald.Channel{herald.ChannelEmail}, c.Ingest.Channels)
	require.Equal(t, []herald.Channel{herald.ChannelEmail}, c.Expander.Channels)
}

func TestVonageCallbackFromPublicURL(t *testing.T) {
	clearHeraldEnv(t)
	s, _ := parseSenderFlags(t, append(slices.Clone(twoOfEach), "--public-url", "https://herald.example.com/")...)
	snd, closer, err := s.newProvider("vonage", zap.NewNop())
	require.NoError(t, err)
	defer closer()
	require.Equal(t, "sms:vonage", snd.Provider())
	require.Equal(t, "https://herald.example.com/providers/vonage/dlr", s.vonageConfig().CallbackURL)
	s.PublicURL = ""
	require.Empty(t, s.vonageConfig().CallbackURL, "no public URL, no callback")
}

func TestTwilioStatusCallbackFromPublicURL(t *testing.T) {
	clearHeraldEnv(t)
	s, _ := parseSenderFlags(t, append(slices.Clone(twoOfEach), "--public-url", "https://herald.example.com/")...)
	require.Equal(t, "https://herald.example.com/providers/twilio/status", s.twilioConfig().StatusCallbackURL)
	s.PublicURL = ""
	require.Empty(t, s.twilioConfig().StatusCallbackURL, "no public URL, no status callback")
}
