package events

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
)

// DefaultRetrySchedule is the Standard Webhooks schedule: the first attempt at once, then a
// retry after each delay. After the last, the message is dropped.
var DefaultRetrySchedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// Defaults of Config.
const (
	DefaultGroup               = "herald-events"
	DefaultTimeout             = 10 * time.Second
	DefaultEndpointConcurrency = 4
	DefaultQueueSize           = 1000
	DefaultLease               = time.Minute
	DefaultSweepInterval       = time.Second
	DefaultHealthInterval      = 15 * time.Second
	DefaultShutdownTimeout     = 10 * time.Second
)

// Config configures the events role.
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Topic is the events topic. Default herald.DefaultEventsTopic.
	Topic string
	// Group is the consumer group. Default DefaultGroup.
	Group string
	// RetrySchedule is the delay before each attempt of a message, the first's included
	// (normally 0). Default DefaultRetrySchedule.
	RetrySchedule []time.Duration
	// Timeout bounds one POST. Default 10s.
	Timeout time.Duration
	// EndpointConcurrency is how many POSTs one endpoint gets at once. Default 4.
	EndpointConcurrency int
	// QueueSize bounds the messages held in memory per endpoint; beyond, they wait in
	// PostgreSQL for the sweeper. Default 1000.
	QueueSize int
	// Lease is how long a claim on a message lasts: a killed worker's messages are taken over
	// after it. Must exceed Timeout. Default 1m.
	Lease time.Duration
	// SweepInterval is the time between two passes of the sweeper (due retries, replays,
	// claims that ran out). Default 1s.
	SweepInterval time.Duration
	// HealthInterval is how often the failing-endpoints gauge is read. Default 15s.
	HealthInterval time.Duration
	// AllowHTTP permits http:// endpoint URLs; AllowLoopback permits loopback addresses
	// (tests, local development). Every other non-public address is refused at every dial
	// (the WEBHOOK channel's guard, senders/webhook.PublicOnly).
	AllowHTTP, AllowLoopback bool
	// ShutdownTimeout bounds how long Run waits for POSTs in flight at cancel. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// ClientOptions are extra franz-go options (TLS, SASL, session timeout).
	ClientOptions []kgo.Opt
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Topic = cmp.Or(c.Topic, herald.DefaultEventsTopic)
	c.Group = cmp.Or(c.Group, DefaultGroup)
	if len(c.RetrySchedule) == 0 {
		c.RetrySchedule = DefaultRetrySchedule
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.EndpointConcurrency = cmp.Or(c.EndpointConcurrency, DefaultEndpointConcurrency)
	c.QueueSize = cmp.Or(c.QueueSize, DefaultQueueSize)
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.SweepInterval = cmp.Or(c.SweepInterval, DefaultSweepInterval)
	c.HealthInterval = cmp.Or(c.HealthInterval, DefaultHealthInterval)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	return c
}

func (c *Config) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("events: no Kafka brokers")
	case c.Timeout < 0 || c.Lease <= c.Timeout:
		return fmt.Errorf("events: Lease (%v) must exceed Timeout (%v)", c.Lease, c.Timeout)
	case c.EndpointConcurrency < 0 || c.QueueSize < 0 || c.SweepInterval < 0 || c.HealthInterval < 0:
		return errors.New("events: negative EndpointConcurrency, QueueSize or interval")
	}
	for _, d := range c.RetrySchedule {
		if d < 0 {
			return errors.New("events: negative delay in RetrySchedule")
		}
	}
	return nil
}

// ParseRetrySchedule reads "0s,5s,5m" (the --events-retry-schedule flag).
func ParseRetrySchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, err := time.ParseDuration(part)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("retry schedule: %q is not a non-negative duration", part)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("retry schedule: no delay")
	}
	return out, nil
}

// FormatRetrySchedule writes a schedule as ParseRetrySchedule reads it.
func FormatRetrySchedule(s []time.Duration) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}
