package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
)

func TestParseProviders(t *testing.T) {
	known := []string{"twilio", "vonage"}
	got, err := parseProviders("sms-providers", "twilio=100, vonage=0", known)
	require.NoError(t, err)
	require.Equal(t, []providerWeight{{"twilio", 100}, {"vonage", 0}}, got)
	for in, msg := range map[string]string{
		"twilio":               `--sms-providers: "twilio" is not provider=weight`,
		"twilio=lots":          "--sms-providers: weight of twilio",
		"twilio=-1":            "--sms-providers: weight of twilio",
		"nexmo=100":            `--sms-providers: unknown provider "nexmo" (known: twilio, vonage)`,
		"twilio=1,twilio=2":    "--sms-providers: twilio listed twice",
		"twilio=0,vonage=0":    "--sms-providers: every provider has weight 0",
		"=5":                   "is not provider=weight",
		"twilio=100,vonage=0,": "is not provider=weight",
	} {
		_, err := parseProviders("sms-providers", in, known)
		require.ErrorContains(t, err, msg, in)
	}
}

// A bad provider list stops herald serve before anything starts, naming the flag.
func TestServeRefusesBadProviderList(t *testing.T) {
	parse := func(args ...string) error {
		var c serveConfig
		f := newFlags("serve")
		c.register(f)
		require.NoError(t, f.Parse(args))
		return c.validate()
	}
	require.NoError(t, parse("--sms-providers", "twilio=100", "--email-providers", "smtp=1"))
	require.ErrorContains(t, parse("--sms-providers", "twilio=100,nexmo=0"), "--sms-providers: unknown provider")
	require.ErrorContains(t, parse("--email-providers", "smtp=x"), "--email-providers: weight of smtp")
}

// One provider listed (all herald's senders give today): the channel's sender stays as it is.
func TestRoutingOneProviderLeavesTheSender(t *testing.T) {
	snd := map[herald.Channel]dispatch.Sender{herald.ChannelSMS: &dispatch.MemorySender{ProviderName: "sms:twilio"}}
	r := routeFlags{sms: "twilio=100"}
	out, rt, err := r.apply(snd, sendersByName(snd), nil, "herald:", zap.NewNop())
	require.NoError(t, err)
	require.Nil(t, rt)
	require.Same(t, snd[herald.ChannelSMS], out[herald.ChannelSMS])
	r = routeFlags{mail: "smtp=100"}
	_, _, err = r.apply(snd, sendersByName(snd), nil, "herald:", zap.NewNop())
	require.ErrorContains(t, err, "--email-providers: smtp is listed but not configured")
}
