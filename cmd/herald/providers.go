package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
)

// route is one provider of a channel: its name within the channel ("twilio", "vonage"),
// the rate-limit account it sends as ("sms:vonage"), its weight from --sms-providers or
// --email-providers (0: standby) and its sender. The routes of a channel are listed in the
// order the flag gave them.
//
// A channel whose flag lists two or more providers is routed by health between them
// (routing.go, dispatch/route); any other channel is served by its first route of the
// highest weight (primaries), the others built, validated and logged.
type route struct {
	Name    string
	Account string
	Weight  int
	Sender  dispatch.Sender
}

// maxWeight bounds a provider weight: weights are shares of the channel's traffic.
const maxWeight = 100

// channelProvider is a provider a channel can be served by, and how its flags enable it.
type channelProvider struct {
	name       string
	configured func(*senderFlags) bool
	enabledBy  string // the flag that enables it, for messages
}

// multiProvider lists, per channel that may have several providers, the known ones in the
// default order: without --sms-providers / --email-providers, the first configured one has
// weight 100 and the others are standbys (weight 0).
var multiProvider = map[herald.Channel]struct {
	flag      string
	providers []channelProvider
}{
	herald.ChannelSMS: {"sms-providers", []channelProvider{
		{"twilio", func(s *senderFlags) bool { return s.Twilio.AccountSID != "" }, "--twilio-account-sid"},
		{"vonage", func(s *senderFlags) bool { return s.Vonage.APIKey != "" }, "--vonage-api-key"},
	}},
	herald.ChannelEmail: {"email-providers", []channelProvider{
		{"smtp", func(s *senderFlags) bool { return s.SMTPAddr != "" }, "--smtp-addr"},
		{"sendgrid", func(s *senderFlags) bool { return s.SendGrid.APIKey != "" }, "--sendgrid-api-key"},
	}},
}

// weighted is one name=weight pair of a providers flag.
type weighted struct {
	name   string
	weight int
}

// parseProviderWeights reads "twilio=100,vonage=0" (a name alone weighs maxWeight) for the
// flag named flag, whose providers are known.
func parseProviderWeights(flag, spec string, known []channelProvider) ([]weighted, error) {
	var out []weighted
	for _, item := range splitList(spec) {
		name, w, hasWeight := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !slices.ContainsFunc(known, func(p channelProvider) bool { return p.name == name }) {
			names := make([]string, len(known))
			for i, p := range known {
				names[i] = p.name
			}
			return nil, fmt.Errorf("--%s: unknown provider %q (want %s)", flag, name, strings.Join(names, ", "))
		}
		if slices.ContainsFunc(out, func(x weighted) bool { return x.name == name }) {
			return nil, fmt.Errorf("--%s: provider %q is listed twice", flag, name)
		}
		weight := maxWeight
		if hasWeight {
			n, err := strconv.Atoi(strings.TrimSpace(w))
			if err != nil || n < 0 || n > maxWeight {
				return nil, fmt.Errorf("--%s: weight of %s %q is not a whole number from 0 to %d", flag, name, w, maxWeight)
			}
			weight = n
		}
		out = append(out, weighted{name, weight})
	}
	if len(out) > 0 && !slices.ContainsFunc(out, func(x weighted) bool { return x.weight > 0 }) {
		return nil, fmt.Errorf("--%s: every provider has weight 0; at least one must carry traffic", flag)
	}
	return out, nil
}

// providerWeights returns, for SMS and EMAIL, the weighted providers that serve the channel:
// the flag's list, each of which must be configured, or by default every configured
// provider in the default order, the first with weight maxWeight and the rest standbys.
func (s *senderFlags) providerWeights() (map[herald.Channel][]weighted, error) {
	out := map[herald.Channel][]weighted{}
	for _, ch := range herald.Channels {
		mp, ok := multiProvider[ch]
		if !ok {
			continue
		}
		spec := s.SMSProviders
		if ch == herald.ChannelEmail {
			spec = s.EmailProviders
		}
		list, err := parseProviderWeights(mp.flag, spec, mp.providers)
		if err != nil {
			return nil, err
		}
		for _, w := range list {
			i := slices.IndexFunc(mp.providers, func(p channelProvider) bool { return p.name == w.name })
			if s.Mode == sendersProviders && !mp.providers[i].configured(s) {
				return nil, fmt.Errorf("--%s: %s is not configured (%s)", mp.flag, w.name, mp.providers[i].enabledBy)
			}
		}
		if len(list) == 0 {
			for _, p := range mp.providers {
				if p.configured(s) {
					list = append(list, weighted{p.name, 0})
				}
			}
			if len(list) > 0 {
				list[0].weight = maxWeight
			}
		}
		out[ch] = list
	}
	return out, nil
}

// primaries returns the sender that serves each channel today: its first route of the
// highest weight.
func primaries(routes map[herald.Channel][]route) map[herald.Channel]dispatch.Sender {
	out := map[herald.Channel]dispatch.Sender{}
	for ch, rs := range routes {
		best := -1
		for i, r := range rs {
			if best < 0 || r.Weight > rs[best].Weight {
				best = i
			}
		}
		if best >= 0 {
			out[ch] = rs[best].Sender
		}
	}
	return out
}
