package events

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/webhook"
)

// Role is the events role. Create it with New and run it with Run.
type Role struct {
	cfg     Config
	pool    *pgxpool.Pool
	secrets Secrets
	client  *http.Client
	log     *zap.Logger
	metrics *metrics
	queues  *queues
}

// New returns the role. pool is the role's own (a slow endpoint must not hold connections
// that dispatch or the API need); secrets signs (apikey.NewWebhookSecrets).
func New(cfg Config, pool *pgxpool.Pool, secrets Secrets, log *zap.Logger) (*Role, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if pool == nil || secrets == nil {
		return nil, errors.New("events: nil pool or secrets")
	}
	if log == nil {
		log = zap.NewNop()
	}
	client, err := senders.NewHTTPClient("webhook-endpoint", senders.HTTPConfig{
		MaxConnsPerHost: cfg.EndpointConcurrency * 4,
		DialControl:     webhook.PublicOnly(cfg.AllowLoopback), // and so no proxy
	})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	ms, err := newMetrics()
	if err != nil {
		return nil, fmt.Errorf("events: metrics: %w", err)
	}
	r := &Role{cfg: cfg, pool: pool, secrets: secrets, client: client, metrics: ms,
		log: log.With(zap.String("component", "events"))}
	r.queues = newQueues(cfg.EndpointConcurrency, cfg.QueueSize, cfg.Lease, r)
	return r, nil
}

// closeMin is the least time the consumer's close gets once the POSTs in flight took the
// whole shutdown budget.
const closeMin = 500 * time.Millisecond

// Run consumes the events topic and delivers until ctx ends, then waits up to
// ShutdownTimeout for the POSTs in flight and the group's leave, and hands back what it
// held unsent.
func (r *Role) Run(ctx context.Context) error {
	defer r.client.CloseIdleConnections()
	c, err := r.newConsumer()
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.run(gctx) })
	g.Go(func() error { return r.sweep(gctx) })
	g.Go(func() error { return r.watchHealth(gctx) })
	err = g.Wait()
	// One budget for the POSTs in flight and the group's leave.
	deadline := time.Now().Add(r.cfg.ShutdownTimeout)
	r.queues.stop(r.cfg.ShutdownTimeout)
	c.close(max(time.Until(deadline), closeMin))
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}
