package dispatch

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/schedule"
)

// Config configures the dispatch workers. Zero values take the defaults noted on each field;
// withDefaults fills them in one place and validate checks the result.
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Lanes configures each priority's lane. A missing priority gets its defaults.
	Lanes map[herald.Priority]LaneConfig
	// Run names the lanes this process runs; the others are left to other processes, as a
	// HIGH-only dispatcher with a CPU share of its own beside one for NORMAL and LOW
	// (docs/operations.md "A HIGH-only dispatcher"). Default: every priority.
	Run []herald.Priority
	// RetryPolicies is the retry policy per channel. A missing channel gets DefaultRetryPolicy.
	RetryPolicies map[herald.Channel]RetryPolicy
	// RateLimits is the limit of each provider account, in provider calls per second, keyed
	// by Sender.Provider() (e.g. "sms:twilio"). A provider without an entry is not limited.
	RateLimits map[string]int
	// RateShares is the share of a provider's limit each priority may use, in (0, 1].
	// Default: LOW 0.6, NORMAL 0.9, HIGH 1.0.
	RateShares map[herald.Priority]float64
	// RateWindowMargin lengthens the rate-limit window past one second, to absorb the time
	// between the limiter's decision and the provider call (the reply crossing the network,
	// a busy scheduler). Default 50 ms, which costs 5 % of a saturated limit's throughput.
	RateWindowMargin time.Duration
	// DegradedProcesses is the largest number of herald dispatch processes that may run at
	// once. While Redis is unreachable each process admits at most limit/DegradedProcesses
	// calls per window and provider, so that together they stay under the limit. Default 4.
	DegradedProcesses int
	// RedisTimeout bounds each Redis call; past it Redis counts as down and dispatch runs in
	// degraded mode until a probe succeeds. Default 250 ms.
	RedisTimeout time.Duration
	// LagInterval is how often each lane's consumer-group lag (records not yet committed)
	// is read from Kafka for the herald_dispatch_consumer_lag_records gauge. Default 15 s.
	LagInterval time.Duration
	// RedisPrefix prefixes every Redis key dispatch writes. Default "herald:".
	RedisPrefix string
	// SendTimeout bounds one provider call. It must stay well below the reaper's lease for
	// SENDING rows (5 min), so that a reaped row's earlier call has certainly ended.
	// Default 30 s.
	SendTimeout time.Duration
	// ShutdownTimeout is how long Run waits, once its context is cancelled, for in-flight
	// deliveries to finish before it cancels them. Default 20 s.
	ShutdownTimeout time.Duration
	// CommitInterval is how often processed offsets are committed. Default 200 ms.
	CommitInterval time.Duration
	// Renderer renders message content. Default: DefaultRenderer.
	Renderer Renderer
	// ClientOptions are extra franz-go options for every lane's client (TLS, SASL, ...).
	ClientOptions []kgo.Opt
	// Adapt, when set, makes the NORMAL and LOW lanes give way to HIGH: each lane's
	// Concurrency becomes the ceiling of an adaptive limit that the controller steps from
	// HIGH's latency and the relay's lag, and every HIGH first attempt's accept → call
	// latency is reported to it (lane_limit.go, docs/dispatch.md "Adaptive limits"). Nil:
	// fixed concurrencies.
	Adapt *adapt.Controller
}

// LaneConfig configures one priority lane.
type LaneConfig struct {
	// Topic is the Kafka topic. Default herald.DefaultTopic (notifications.high / .normal / .low).
	Topic string
	// Group is the consumer group. Default herald.DefaultConsumerGroup (herald-dispatch-high /
	// -normal / -low).
	Group string
	// Concurrency is the number of deliveries processed at once; it may exceed the
	// partition count. Default HIGH 12, NORMAL 6, LOW 2.
	Concurrency int
	// RateWait is how long a rate-limited delivery waits in its lane for capacity before it
	// is deferred with next_attempt_at (which never uses up an attempt). Negative: defer at
	// once. Default HIGH 2 s, NORMAL 5 s, LOW 10 s.
	RateWait time.Duration
	// RetryAmbiguous says whether an ambiguous outcome (the provider may have taken the
	// message) is retried, risking a duplicate, or ends FAILED. Default: true for HIGH and
	// NORMAL, false for LOW. Nil means the default.
	RetryAmbiguous *bool
}

// RetryPolicy is the retry schedule of one channel: attempt n (1-based) that fails
// transiently is retried after a delay drawn uniformly from [0, min(Max, Base·2^(n-1))]
// ("full jitter"), or after the provider's Retry-After when that is longer, up to
// MaxRetryAfter.
type RetryPolicy struct {
	// Base is the first delay's upper bound. Default 2 s.
	Base time.Duration
	// Max caps every delay's upper bound. Default 5 min.
	Max time.Duration
	// MaxAttempts is the number of attempts before the delivery ends FAILED. Default 6.
	MaxAttempts int
	// MaxRetryAfter caps the delay a provider's Retry-After may ask for: a provider (or a
	// proxy in front of it) answering "Retry-After: 999999999" must not park a delivery for
	// decades. Default 1 h.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is the policy of a channel without its own.
var DefaultRetryPolicy = RetryPolicy{Base: 2 * time.Second, Max: 5 * time.Minute, MaxAttempts: 6, MaxRetryAfter: schedule.DefaultMaxRetryAfter}

// DefaultLanes are the lane settings used where Config.Lanes leaves a field zero. Topic and
// group names default to herald.DefaultTopic and herald.DefaultConsumerGroup.
var DefaultLanes = map[herald.Priority]LaneConfig{
	herald.PriorityHigh:   {Concurrency: 12, RateWait: 2 * time.Second},
	herald.PriorityNormal: {Concurrency: 6, RateWait: 5 * time.Second},
	herald.PriorityLow:    {Concurrency: 2, RateWait: 10 * time.Second},
}

// DefaultRateShares are the shares of a provider limit used where Config.RateShares has no entry.
var DefaultRateShares = map[herald.Priority]float64{
	herald.PriorityHigh: 1.0, herald.PriorityNormal: 0.9, herald.PriorityLow: 0.6,
}

// Defaults of Config's scalar fields.
const (
	DefaultRateWindowMargin  = 50 * time.Millisecond
	DefaultDegradedProcesses = 4
	DefaultRedisTimeout      = 250 * time.Millisecond
	DefaultLagInterval       = 15 * time.Second
	DefaultSendTimeout       = 30 * time.Second
	DefaultShutdownTimeout   = 20 * time.Second
	DefaultCommitInterval    = 200 * time.Millisecond
)

// withDefaults returns a copy of c with every zero field set to its default. Maps are copied.
func (c Config) withDefaults() Config {
	lanes := make(map[herald.Priority]LaneConfig, len(herald.Priorities))
	for _, p := range herald.Priorities {
		lanes[p] = c.Lanes[p].withDefaults(p)
	}
	c.Lanes = lanes
	if len(c.Run) == 0 {
		c.Run = herald.Priorities
	}
	c.Run = slices.Clone(c.Run)
	policies := make(map[herald.Channel]RetryPolicy, len(herald.Channels))
	for _, ch := range herald.Channels {
		policies[ch] = c.RetryPolicies[ch].withDefaults()
	}
	c.RetryPolicies = policies
	// An explicit share is kept as given (validate rejects one outside (0, 1]).
	shares := maps.Clone(DefaultRateShares)
	maps.Copy(shares, c.RateShares)
	c.RateShares = shares
	c.RateWindowMargin = cmp.Or(c.RateWindowMargin, DefaultRateWindowMargin)
	c.DegradedProcesses = cmp.Or(c.DegradedProcesses, DefaultDegradedProcesses)
	c.RedisTimeout = cmp.Or(c.RedisTimeout, DefaultRedisTimeout)
	c.LagInterval = cmp.Or(max(c.LagInterval, 0), DefaultLagInterval)
	c.RedisPrefix = cmp.Or(c.RedisPrefix, herald.DefaultRedisPrefix)
	c.SendTimeout = cmp.Or(c.SendTimeout, DefaultSendTimeout)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.CommitInterval = cmp.Or(c.CommitInterval, DefaultCommitInterval)
	if c.Renderer == nil {
		c.Renderer = DefaultRenderer{}
	}
	return c
}

// withDefaults returns l with every zero field set to priority p's default.
func (l LaneConfig) withDefaults(p herald.Priority) LaneConfig {
	d := DefaultLanes[p]
	l.Topic = cmp.Or(l.Topic, herald.DefaultTopic(p))
	l.Group = cmp.Or(l.Group, herald.DefaultConsumerGroup(p))
	l.Concurrency = cmp.Or(l.Concurrency, d.Concurrency)
	l.RateWait = cmp.Or(l.RateWait, d.RateWait)
	if l.RetryAmbiguous == nil {
		retry := p != herald.PriorityLow
		l.RetryAmbiguous = &retry
	}
	return l
}

// withDefaults returns rp with every zero field set to DefaultRetryPolicy's.
func (rp RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy
	rp.Base = cmp.Or(rp.Base, d.Base)
	rp.Max = cmp.Or(rp.Max, d.Max)
	rp.MaxAttempts = cmp.Or(rp.MaxAttempts, d.MaxAttempts)
	rp.MaxRetryAfter = cmp.Or(rp.MaxRetryAfter, d.MaxRetryAfter)
	return rp
}

// SendingHold is the longest a claimed delivery stays SENDING before its provider call has
// certainly ended: the rate-limit wait (the largest lane RateWait, when any provider is
// limited) and the provider call (SendTimeout), plus a margin for the claim round trip and a
// busy scheduler. The relay's reaper must give SENDING rows a longer lease: a shorter one
// returns rows whose provider call is still in flight, and a second worker calls the provider
// while the first call runs. (The outcome write after the call is bounded too; a reap while
// it is outstanding costs at most an ambiguous retry, never two calls at once.) Zero fields
// count at their defaults.
func (c Config) SendingHold() time.Duration {
	c = c.withDefaults()
	var wait time.Duration
	if len(c.RateLimits) > 0 {
		for _, l := range c.Lanes {
			wait = max(wait, l.RateWait)
		}
	}
	return wait + c.SendTimeout + sendingHoldMargin
}

// sendingHoldMargin covers the claim round trip and scheduling delays in SendingHold.
const sendingHoldMargin = 5 * time.Second

// maxSendTimeout keeps a provider call well inside the reaper's lease on SENDING rows.
const maxSendTimeout = 4 * time.Minute

func (c Config) validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no Kafka brokers"))
	}
	for p, l := range c.Lanes {
		if l.Concurrency < 1 {
			errs = append(errs, fmt.Errorf("lane %s: concurrency %d < 1", p, l.Concurrency))
		}
		// A claimed row stays SENDING through the rate-limit wait and the call; both must end
		// well inside the reaper's lease on SENDING rows (5 min).
		if l.RateWait+c.SendTimeout > maxSendTimeout+30*time.Second {
			errs = append(errs, fmt.Errorf("lane %s: rate wait %v + send timeout %v > %v", p, l.RateWait, c.SendTimeout, maxSendTimeout+30*time.Second))
		}
	}
	for i, p := range c.Run {
		if _, err := herald.ParsePriority(string(p)); err != nil || slices.Contains(c.Run[:i], p) {
			errs = append(errs, fmt.Errorf("lanes to run %v: %q is not a priority, or named twice", c.Run, p))
		}
	}
	for ch, rp := range c.RetryPolicies {
		if rp.Base < 0 || rp.Max < rp.Base || rp.MaxAttempts < 1 || rp.MaxRetryAfter < 0 {
			errs = append(errs, fmt.Errorf("retry policy %s: need 0 <= base <= max, attempts >= 1 and max retry-after >= 0", ch))
		}
	}
	for prov, n := range c.RateLimits {
		if n < 1 {
			errs = append(errs, fmt.Errorf("rate limit %s: %d < 1 per second", prov, n))
		}
	}
	for p, s := range c.RateShares {
		if s <= 0 || s > 1 {
			errs = append(errs, fmt.Errorf("rate share %s: %v not in (0, 1]", p, s))
		}
	}
	if c.RateWindowMargin < 0 {
		errs = append(errs, errors.New("negative rate window margin"))
	}
	if c.RedisTimeout < 0 {
		errs = append(errs, errors.New("negative redis timeout"))
	}
	if c.DegradedProcesses < 1 {
		errs = append(errs, errors.New("degraded processes < 1"))
	}
	if c.SendTimeout < 0 || c.SendTimeout > maxSendTimeout {
		errs = append(errs, fmt.Errorf("send timeout %v not in (0, %v]", c.SendTimeout, maxSendTimeout))
	}
	if c.ShutdownTimeout < 0 || c.CommitInterval < 0 {
		errs = append(errs, errors.New("negative shutdown timeout or commit interval"))
	}
	return errors.Join(errs...)
}
