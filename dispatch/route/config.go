package route

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
)

// Config configures the health-based routing of every channel with several provider
// accounts. Zero values take the defaults noted on each field; withDefaults fills them in one
// place and validate checks the result.
type Config struct {
	// Window is how long an account's outcomes are counted before the count starts again
	// (a fixed window, restarted at every step). Default 10 s.
	Window time.Duration
	// MinFailures is how many failed calls (transient errors and timeouts or other
	// ambiguous outcomes; a permanent error is the recipient's, not the provider's) one
	// window must hold before the account steps down. Default 5.
	MinFailures int
	// FailureRatio is the share of the window's calls that must have failed, too, in
	// (0, 1]. Default 0.5.
	FailureRatio float64
	// Steps is how many steps take an account from its weight to no traffic; each step
	// moves weight/Steps of its share to the others. Default 4 (25 % a step).
	Steps int
	// StepInterval is the shortest time between two steps down of one account. Default 1 s.
	StepInterval time.Duration
	// ProbeInterval is how often a degraded account gets a half-open probe: one real
	// attempt, across every process, routed to it although its share would send it
	// elsewhere. A probe that succeeds gives back one step; so a recovered account returns
	// to its weight in Steps probe intervals. Default 5 s.
	ProbeInterval time.Duration
	// FailoverAmbiguous says, per priority, whether the retry after an ambiguous outcome
	// (the provider may have taken the message) may go to another account, risking a
	// duplicate, or stays on the account of that attempt. A priority without an entry gets
	// its default: HIGH true (a second OTP costs less than none), NORMAL and LOW false.
	FailoverAmbiguous map[herald.Priority]bool
	// RetryAtOnce says, per priority, whether a retry after a transient error that goes to
	// another account skips the retry policy's backoff (it is due at once; the relay
	// publishes it within milliseconds). A priority without an entry gets its default: HIGH
	// true, NORMAL and LOW false (they keep their backoff, on the other account).
	RetryAtOnce map[herald.Priority]bool
	// RedisPrefix prefixes every Redis key. Default "herald:" (dispatch's prefix: set both
	// alike).
	RedisPrefix string
	// RedisTimeout bounds each Redis call; after a failure the router decides from what it
	// last knew for RedisRetry. Default 250 ms.
	RedisTimeout time.Duration
	// RedisRetry is how long the router keeps off Redis after a failed call. Default 500 ms.
	RedisRetry time.Duration
	// StateTTL is how long an account's health outlives its last update; an account not
	// heard of for that long counts as healthy again. Default 1 h.
	StateTTL time.Duration
}

// Defaults of the per-priority policies.
var (
	DefaultFailoverAmbiguous = map[herald.Priority]bool{
		herald.PriorityHigh: true, herald.PriorityNormal: false, herald.PriorityLow: false,
	}
	DefaultRetryAtOnce = map[herald.Priority]bool{
		herald.PriorityHigh: true, herald.PriorityNormal: false, herald.PriorityLow: false,
	}
)

// Defaults of Config's scalar fields.
const (
	DefaultWindow        = 10 * time.Second
	DefaultMinFailures   = 5
	DefaultFailureRatio  = 0.5
	DefaultSteps         = 4
	DefaultStepInterval  = time.Second
	DefaultProbeInterval = 5 * time.Second
	DefaultRedisTimeout  = 250 * time.Millisecond
	DefaultRedisRetry    = 500 * time.Millisecond
	DefaultStateTTL      = time.Hour
)

// withDefaults returns c with every zero field set to its default. Maps are copied.
func (c Config) withDefaults() Config {
	c.Window = cmp.Or(c.Window, DefaultWindow)
	c.MinFailures = cmp.Or(c.MinFailures, DefaultMinFailures)
	c.FailureRatio = cmp.Or(c.FailureRatio, DefaultFailureRatio)
	c.Steps = cmp.Or(c.Steps, DefaultSteps)
	c.StepInterval = cmp.Or(c.StepInterval, DefaultStepInterval)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	c.FailoverAmbiguous = withPolicyDefaults(c.FailoverAmbiguous, DefaultFailoverAmbiguous)
	c.RetryAtOnce = withPolicyDefaults(c.RetryAtOnce, DefaultRetryAtOnce)
	c.RedisPrefix = cmp.Or(c.RedisPrefix, herald.DefaultRedisPrefix)
	c.RedisTimeout = cmp.Or(c.RedisTimeout, DefaultRedisTimeout)
	c.RedisRetry = cmp.Or(c.RedisRetry, DefaultRedisRetry)
	c.StateTTL = cmp.Or(c.StateTTL, DefaultStateTTL)
	return c
}

func withPolicyDefaults(m, def map[herald.Priority]bool) map[herald.Priority]bool {
	out := make(map[herald.Priority]bool, len(herald.Priorities))
	for _, p := range herald.Priorities {
		v, ok := m[p]
		if !ok {
			v = def[p]
		}
		out[p] = v
	}
	return out
}

func (c Config) validate() error {
	var errs []error
	if c.Window <= 0 || c.StepInterval <= 0 || c.ProbeInterval <= 0 || c.RedisTimeout <= 0 || c.RedisRetry <= 0 {
		errs = append(errs, errors.New("route: window, step interval, probe interval and redis timeouts must be positive"))
	}
	if c.MinFailures < 1 {
		errs = append(errs, fmt.Errorf("route: min failures %d < 1", c.MinFailures))
	}
	if c.FailureRatio <= 0 || c.FailureRatio > 1 {
		errs = append(errs, fmt.Errorf("route: failure ratio %v not in (0, 1]", c.FailureRatio))
	}
	if c.Steps < 1 {
		errs = append(errs, fmt.Errorf("route: steps %d < 1", c.Steps))
	}
	if c.StateTTL < c.Window || c.StateTTL < c.ProbeInterval {
		errs = append(errs, errors.New("route: state TTL shorter than the window or the probe interval"))
	}
	return errors.Join(errs...)
}
