package main

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/events"
	"github.com/heraldhq/herald/internal/apikey"
)

// endpointFlags map flags onto events.Config: the events role, which delivers the status
// events to the clients' webhook endpoints (docs/webhook-endpoints.md). The topic is
// --events-topic; http:// and loopback endpoint URLs follow --webhook-allow-http and
// --webhook-allow-loopback, like the WEBHOOK channel.
type endpointFlags struct {
	cfg      events.Config
	schedule string
}

func (e *endpointFlags) register(f *envFlags) {
	c := &e.cfg
	f.String(&c.Group, "events-group", events.DefaultGroup, "Kafka consumer group of the events role")
	f.String(&e.schedule, "events-retry-schedule", events.FormatRetrySchedule(events.DefaultRetrySchedule),
		"delay before each attempt of an event to a webhook endpoint, the first included (Standard Webhooks); after the last the event is dropped")
	f.Duration(&c.Timeout, "events-timeout", events.DefaultTimeout, "timeout of one POST to a webhook endpoint")
	f.Int(&c.EndpointConcurrency, "events-endpoint-concurrency", events.DefaultEndpointConcurrency, "POSTs one webhook endpoint gets at once")
	f.Int(&c.QueueSize, "events-queue-size", events.DefaultQueueSize, "events held in memory per webhook endpoint; beyond, they wait in PostgreSQL")
	f.Duration(&c.Lease, "events-lease", events.DefaultLease, "how long an events worker's claim on an event lasts; a killed worker's events are taken over after it (must exceed --events-timeout)")
	f.Duration(&c.SweepInterval, "events-sweep-interval", events.DefaultSweepInterval, "time between two passes over due retries, replays and expired claims")
}

// config is the role's configuration from the flags and the ones it shares.
func (e *endpointFlags) config(c serveConfig) (events.Config, error) {
	cfg := e.cfg
	s, err := events.ParseRetrySchedule(e.schedule)
	if err != nil {
		return cfg, fmt.Errorf("--events-retry-schedule: %w", err)
	}
	cfg.RetrySchedule = s
	cfg.Brokers = c.KafkaBrokers
	cfg.Topic = c.Events.Topic
	cfg.AllowHTTP, cfg.AllowLoopback = c.Senders.Webhook.AllowHTTP, c.Senders.Webhook.AllowLoopback
	cfg.ShutdownTimeout = drainTimeout(c.ShutdownTimeout)
	opts, err := c.Kafka.options(c.KafkaBrokers)
	if err != nil {
		return cfg, err
	}
	cfg.ClientOptions = opts
	return cfg, nil
}

// endpointsPoolConns sizes the events role's own pool: the consumer's writes, the sweeper,
// and the recording of attempts. A slow endpoint holds none of them during its POST.
const endpointsPoolConns = 8

func newEventsRole(ctx context.Context, c serveConfig, log *zap.Logger) (*events.Role, func(), error) {
	cfg, err := c.Endpoints.config(c)
	if err != nil {
		return nil, nil, err
	}
	pc := c.commonConfig
	pc.MaxConns = endpointsPoolConns
	pool, err := openPool(ctx, pc, "herald-events")
	if err != nil {
		return nil, nil, err
	}
	r, err := events.New(cfg, pool, apikey.NewWebhookSecrets(pool, 0), log)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return r, pool.Close, nil
}
