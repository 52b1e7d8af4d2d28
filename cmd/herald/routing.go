package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/dispatch/route"
)

// routeFlags maps the per-channel provider lists and the routing tunables onto route.Config.
// A channel listed with two or more providers is routed by health (dispatch/route); one
// provider, or none listed, leaves the channel's sender as it is.
type routeFlags struct {
	cfg  route.Config
	sms  string
	mail string
}

// routedChannels are the channels whose providers may be listed, with their flag.
var routedChannels = []struct {
	ch   herald.Channel
	flag string
}{{herald.ChannelSMS, "sms-providers"}, {herald.ChannelEmail, "email-providers"}}

func (r *routeFlags) register(f *envFlags) {
	f.String(&r.sms, "sms-providers", "", "SMS providers and their weights, e.g. twilio=100,vonage=0 (0: standby, used while the others are unhealthy); empty: the one configured")
	f.String(&r.mail, "email-providers", "", "e-mail providers and their weights, e.g. smtp=100,sendgrid=0; empty: the one configured")
	c := &r.cfg
	f.Duration(&c.Window, "route-window", 10*time.Second, "window over which a provider account's failed calls are counted")
	f.Int(&c.MinFailures, "route-min-failures", 5, "failed calls in one window before a provider account gives up a step of its traffic")
	f.Float(&c.FailureRatio, "route-failure-ratio", 0.5, "share of the window's calls that must have failed too, in (0, 1]")
	f.Int(&c.Steps, "route-steps", 4, "steps from a provider account's weight to no traffic (4: 25 % a step)")
	f.Duration(&c.StepInterval, "route-step-interval", time.Second, "shortest time between two steps down of one provider account")
	f.Duration(&c.ProbeInterval, "route-probe-interval", 5*time.Second, "time between two half-open probes of a degraded provider account; each success gives back one step")
}

func (r *routeFlags) list(ch herald.Channel) string {
	if ch == herald.ChannelSMS {
		return r.sms
	}
	return r.mail
}

// providerWeight is one entry of a provider list.
type providerWeight struct {
	Name   string
	Weight int
}

// parseProviders reads a provider list, "twilio=100,vonage=0", of the flag named flag; known
// are the provider names the channel can have. Names must be known and listed once, weights
// non-negative integers, and at least one weight positive.
func parseProviders(flag, s string, known []string) ([]providerWeight, error) {
	var out []providerWeight
	seen := map[string]bool{}
	positive := false
	for _, kv := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(kv), "=")
		name = strings.TrimSpace(name)
		n, err := strconv.Atoi(strings.TrimSpace(w))
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("--%s: %q is not provider=weight", flag, kv)
		case err != nil || n < 0:
			return nil, fmt.Errorf("--%s: weight of %s %q is not a whole number >= 0", flag, name, w)
		case !contains(known, name):
			return nil, fmt.Errorf("--%s: unknown provider %q (known: %s)", flag, name, strings.Join(known, ", "))
		case seen[name]:
			return nil, fmt.Errorf("--%s: %s listed twice", flag, name)
		}
		seen[name], positive = true, positive || n > 0
		out = append(out, providerWeight{Name: name, Weight: n})
	}
	if !positive {
		return nil, fmt.Errorf("--%s: every provider has weight 0; give one a weight", flag)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// knownProviders are the provider names each listed channel can have.
var knownProviders = map[herald.Channel][]string{herald.ChannelSMS: {"twilio"}, herald.ChannelEmail: {"smtp"}}

// check parses both lists, so that a bad one stops every role at start.
func (r *routeFlags) check() error {
	for _, c := range routedChannels {
		if s := r.list(c.ch); s != "" {
			if _, err := parseProviders(c.flag, s, knownProviders[c.ch]); err != nil {
				return err
			}
		}
	}
	return nil
}

// apply routes every channel listed with two or more providers over their senders: byName
// holds each channel's senders by provider name. It returns the senders dispatch gets and the
// router (nil when nothing is routed).
func (r *routeFlags) apply(snd map[herald.Channel]dispatch.Sender, byName map[herald.Channel]map[string]dispatch.Sender,
	rdb *redis.Client, prefix string, log *zap.Logger) (map[herald.Channel]dispatch.Sender, *route.Router, error) {
	accounts := map[herald.Channel][]route.Account{}
	for _, c := range routedChannels {
		s := r.list(c.ch)
		if s == "" {
			continue
		}
		list, err := parseProviders(c.flag, s, knownProviders[c.ch])
		if err != nil {
			return nil, nil, err
		}
		var accs []route.Account
		for _, pw := range list {
			sender := byName[c.ch][pw.Name]
			if sender == nil {
				return nil, nil, fmt.Errorf("--%s: %s is listed but not configured", c.flag, pw.Name)
			}
			accs = append(accs, route.Account{Sender: sender, Weight: pw.Weight})
		}
		if len(accs) > 1 {
			accounts[c.ch] = accs
		}
	}
	if len(accounts) == 0 {
		return snd, nil, nil
	}
	cfg := r.cfg
	cfg.RedisPrefix = prefix
	rt, err := route.New(cfg, rdb, accounts, log)
	if err != nil {
		return nil, nil, err
	}
	return rt.Senders(snd), rt, nil
}

// sendersByName indexes each channel's one sender by its provider name ("sms:twilio" →
// twilio), which is all herald's senders give today.
func sendersByName(snd map[herald.Channel]dispatch.Sender) map[herald.Channel]map[string]dispatch.Sender {
	out := map[herald.Channel]map[string]dispatch.Sender{}
	for ch, s := range snd {
		if _, name, ok := strings.Cut(s.Provider(), ":"); ok {
			out[ch] = map[string]dispatch.Sender{name: s}
		}
	}
	return out
}

// closeRouter returns closeSenders that also closes rt, if any.
func closeRouter(rt *route.Router, closeSenders func()) func() {
	if rt == nil {
		return closeSenders
	}
	return func() { _ = rt.Close(); closeSenders() }
}
