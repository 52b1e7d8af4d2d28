package sim

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Outcome is what the simulator does with one request.
type Outcome string

const (
	Accepted    Outcome = "accepted"
	RateLimited Outcome = "rate_limited"
	Unavailable Outcome = "unavailable"
	TimedOut    Outcome = "timeout" // taken, never answered: counts as delivered
	Rejected    Outcome = "rejected"
)

// Delivered reports whether the provider took the message.
func (o Outcome) Delivered() bool { return o == Accepted || o == TimedOut }

// dice draws faults and latencies; its state is shared by every handler.
type dice struct {
	mu      sync.Mutex
	rng     *rand.Rand
	faults  map[string]Faults
	latency map[string]Latency
	deflt   Latency
}

func newDice(cfg Config) *dice {
	d := &dice{
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		faults:  make(map[string]Faults),
		latency: make(map[string]Latency),
		deflt:   cfg.DefaultLatency,
	}
	for p, f := range cfg.Faults {
		d.faults[p] = f
	}
	for p, l := range cfg.Latency {
		d.latency[p] = l
	}
	return d
}

func (d *dice) setFaults(provider string, f Faults) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults[provider] = f
}

func (d *dice) setLatency(provider string, l Latency) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.latency[provider] = l
}

func (d *dice) snapshot() (map[string]Faults, map[string]Latency) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := make(map[string]Faults, len(d.faults))
	for k, v := range d.faults {
		f[k] = v
	}
	l := make(map[string]Latency, len(d.latency))
	for k, v := range d.latency {
		l[k] = v
	}
	return f, l
}

// roll decides the outcome and the response delay of one request to provider, and the
// Retry-After to announce.
func (d *dice) roll(provider string) (Outcome, time.Duration, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.faults[provider]
	retryAfter := f.RetryAfter
	if retryAfter == 0 {
		retryAfter = time.Second
	}
	o := Accepted
	r := d.rng.Float64()
	switch {
	case r < f.RateLimit:
		o = RateLimited
	case r < f.RateLimit+f.Unavailable:
		o = Unavailable
	case r < f.RateLimit+f.Unavailable+f.Timeout:
		o = TimedOut
	case r < f.RateLimit+f.Unavailable+f.Timeout+f.Permanent:
		o = Rejected
	}
	l, ok := d.latency[provider]
	if !ok {
		l = d.deflt
	}
	return o, d.delay(l), retryAfter
}

// delay samples a log-normal with the given median and 99th percentile (z = 2.326).
func (d *dice) delay(l Latency) time.Duration {
	if l.Median == 0 {
		return l.Min
	}
	sigma := 0.0
	if l.P99 > l.Median {
		sigma = math.Log(float64(l.P99)/float64(l.Median)) / 2.326
	}
	v := time.Duration(float64(l.Median) * math.Exp(sigma*d.rng.NormFloat64()))
	return max(v, l.Min)
}
