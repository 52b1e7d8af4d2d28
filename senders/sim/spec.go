package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSpec applies a compact fault and latency spec, as given on the command line, to cfg:
// comma-separated provider.setting=value pairs, where provider is one of Providers or "all"
// and setting is one of ratelimit, unavailable, timeout, permanent (rates 0..1), retryafter,
// min, median, p99 (durations). Example:
//
//	all.median=20ms,all.p99=200ms,fcm.unavailable=0.05,twilio.ratelimit=0.1,twilio.retryafter=2s
func ParseSpec(spec string, cfg *Config) error {
	if cfg.Faults == nil {
		cfg.Faults = make(map[string]Faults)
	}
	if cfg.Latency == nil {
		cfg.Latency = make(map[string]Latency)
	}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, ok := strings.Cut(item, "=")
		provider, setting, ok2 := strings.Cut(strings.ToLower(key), ".")
		if !ok || !ok2 {
			return fmt.Errorf("sim spec %q: want provider.setting=value", item)
		}
		targets := []string{provider}
		if provider == "all" {
			targets = Providers
		} else if !knownProvider(provider) {
			return fmt.Errorf("sim spec %q: unknown provider %q", item, provider)
		}
		for _, p := range targets {
			f, l := cfg.Faults[p], cfg.Latency[p]
			if err := apply(&f, &l, setting, value); err != nil {
				return fmt.Errorf("sim spec %q: %w", item, err)
			}
			cfg.Faults[p], cfg.Latency[p] = f, l
		}
	}
	return cfg.validate()
}

func apply(f *Faults, l *Latency, setting, value string) error {
	rate := func(dst *float64) error {
		v, err := strconv.ParseFloat(value, 64)
		*dst = v
		return err
	}
	dur := func(dst *time.Duration) error {
		v, err := time.ParseDuration(value)
		*dst = v
		return err
	}
	switch setting {
	case "ratelimit":
		return rate(&f.RateLimit)
	case "unavailable":
		return rate(&f.Unavailable)
	case "timeout":
		return rate(&f.Timeout)
	case "permanent":
		return rate(&f.Permanent)
	case "retryafter":
		return dur(&f.RetryAfter)
	case "min":
		return dur(&l.Min)
	case "median":
		return dur(&l.Median)
	case "p99":
		return dur(&l.P99)
	}
	return fmt.Errorf("unknown setting %q", setting)
}
