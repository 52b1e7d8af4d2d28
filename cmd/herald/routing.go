package main

import (
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	droute "github.com/heraldhq/herald/dispatch/route"
)

// routeFlags maps the routing tunables onto route.Config. The providers of a channel and
// their weights come from --sms-providers and --email-providers (providers.go): a channel
// whose flag lists two or more providers is routed by health (dispatch/route). A channel
// whose flag is not given is served by its primary (the first configured provider), as
// before routing existed, even when other providers are configured: routing starts where an
// operator lists the providers.
type routeFlags struct {
	cfg droute.Config
}

func (r *routeFlags) register(f *envFlags) {
	c := &r.cfg
	f.Duration(&c.Window, "route-window", droute.DefaultWindow, "window over which a provider account's failed calls are counted")
	f.Int(&c.MinFailures, "route-min-failures", droute.DefaultMinFailures, "failed calls in one window before a provider account gives up a step of its traffic")
	f.Float(&c.FailureRatio, "route-failure-ratio", droute.DefaultFailureRatio, "share of the window's calls that must have failed too, in (0, 1]")
	f.Int(&c.Steps, "route-steps", droute.DefaultSteps, "steps from a provider account's weight to no traffic (4: 25 % a step)")
	f.Duration(&c.StepInterval, "route-step-interval", droute.DefaultStepInterval, "shortest time between two steps down of one provider account")
	f.Duration(&c.ProbeInterval, "route-probe-interval", droute.DefaultProbeInterval, "time between two half-open probes of a degraded provider account; each success gives back one step")
}

// senders returns the sender dispatch gets for each channel: a routed one over the routes of
// a channel listed (listed[ch]) with two or more providers, its primary otherwise; and the
// router (nil when no channel is routed).
func (r *routeFlags) senders(routes map[herald.Channel][]route, listed map[herald.Channel]bool, rdb *redis.Client,
	prefix string, log *zap.Logger) (map[herald.Channel]dispatch.Sender, *droute.Router, error) {
	plain := primaries(routes)
	accounts := map[herald.Channel][]droute.Account{}
	for ch, rs := range routes {
		if len(rs) < 2 || !listed[ch] {
			continue
		}
		delete(plain, ch)
		for _, rt := range rs {
			accounts[ch] = append(accounts[ch], droute.Account{Sender: rt.Sender, Weight: rt.Weight})
		}
	}
	if len(accounts) == 0 {
		return plain, nil, nil
	}
	cfg := r.cfg
	cfg.RedisPrefix = prefix
	rt, err := droute.New(cfg, rdb, accounts, log)
	if err != nil {
		return nil, nil, err
	}
	return rt.Senders(plain), rt, nil
}

// closeRouter returns closeSenders that also closes rt, if any.
func closeRouter(rt *droute.Router, closeSenders func()) func() {
	if rt == nil {
		return closeSenders
	}
	return func() { _ = rt.Close(); closeSenders() }
}
