package main

import (
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/adapt"
)

// adaptFlags maps flags onto adapt.Config: whether background work adapts to HIGH, and the
// targets it adapts to.
type adaptFlags struct {
	enabled bool
	cfg     adapt.Config
}

func (a *adaptFlags) register(f *envFlags) {
	f.Bool(&a.enabled, "adaptive-limits", true, "let the NORMAL and LOW lanes, the campaign expander and the re-drive give way to HIGH "+
		"(--dispatch-concurrency-normal/-low, --campaign-rate and --redrive-rate become ceilings); false: fixed limits")
	f.Duration(&a.cfg.Targets.HighLatency, "adaptive-high-latency", adapt.DefaultHighLatency,
		"HIGH accept → provider call latency (90th percentile of each dispatch process) above which background work slows down")
	f.Float(&a.cfg.Targets.Tolerance, "adaptive-high-tolerance", adapt.DefaultTolerance,
		"above 0: HIGH counts as late only past this many times its calm latency on this machine too (the smallest of the last 2 minutes), "+
			"so that LOW keeps its share where HIGH never gets under --adaptive-high-latency; 0: that target alone")
	f.Duration(&a.cfg.Targets.RelayLag, "adaptive-relay-lag", adapt.DefaultRelayLag,
		"relay lag (commit → decoded) above which background work slows down")
	f.Duration(&a.cfg.Interval, "adaptive-interval", adapt.DefaultInterval, "how often each process reports and reads the shared signal and steps its limits")
}

// newAdapt builds the process's adaptive-limit controller on a Redis client of its own, and
// hands it to the components it limits or that feed it (before they are built). Disabled, it
// returns a nil controller: fixed limits.
func newAdapt(c *serveConfig, log *zap.Logger) (*adapt.Controller, func(), error) {
	if !c.Adapt.enabled {
		return nil, func() {}, nil
	}
	ropts, err := c.Redis.options(c.RedisAddr)
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(ropts)
	cfg := c.Adapt.cfg
	cfg.Prefix = c.Groups.redisPrefix
	ctl, err := adapt.New(cfg, rdb, log)
	if err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("adaptive limits: %w", err)
	}
	c.Expander.Adapt, c.Redrive.Adapt, c.Dispatch.cfg.Adapt = ctl, ctl, ctl
	c.Relay.cfg.ObserveLag = ctl.ObserveRelayLag
	return ctl, func() { rdb.Close() }, nil
}
