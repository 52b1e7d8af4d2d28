// Package relay is the bench scenario that measures herald's CDC relay beside the relay it
// replaces: the seed article's polling outbox relay (Poller, a baseline that lives here and
// never in herald serve) and River, a PostgreSQL job queue (bench/river, its own module).
//
//	eval "$(deploy/local/stack.sh env)"
//	go test -run '^$' -bench ScenarioRelay -benchtime 1x -timeout 20m ./bench/relay
//
// See docs/benchmarks.md, "Relay: herald vs the polling relay vs River".
package relay

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/sleep"
)

// PollerConfig shapes the seed's polling relay. Zero fields take the seed's values.
type PollerConfig struct {
	// Topics maps each priority to its Kafka topic, as herald's relay is configured.
	Topics map[herald.Priority]string
	// Delay is the pause after each poll, whatever it found (Spring's fixedDelay). Default
	// 200 ms.
	Delay time.Duration
	// Batch is the most rows one poll locks and publishes. Default 500.
	Batch int
}

// Poller is the seed article's outbox relay, ported as it is written there: every Delay, one
// transaction selects up to Batch due PENDING rows FOR UPDATE SKIP LOCKED, highest priority
// first, sends each to Kafka and waits for the broker's acknowledgement before the next
// (kafka.send(...).join()), marks it QUEUED, and commits. It publishes herald's record: the
// same topic per priority, key, value and headers as herald's relay, so that the same
// consumer reads both.
type Poller struct {
	cfg   PollerConfig
	pool  *pgxpool.Pool
	kafka *kgo.Client
	log   *zap.Logger
}

// NewPoller returns a Poller on pool and kafka.
func NewPoller(cfg PollerConfig, pool *pgxpool.Pool, kafka *kgo.Client, log *zap.Logger) (*Poller, error) {
	cfg.Delay = cmp.Or(cfg.Delay, 200*time.Millisecond)
	cfg.Batch = cmp.Or(cfg.Batch, 500)
	for _, p := range herald.Priorities {
		if cfg.Topics[p] == "" {
			return nil, fmt.Errorf("polling relay: no topic for %s", p)
		}
	}
	return &Poller{cfg: cfg, pool: pool, kafka: kafka, log: log.With(zap.String("component", "polling-relay"))}, nil
}

// Run polls until ctx ends. A failed poll is logged and retried after the delay, as the
// scheduler of the seed would.
func (p *Poller) Run(ctx context.Context) error {
	for wait := time.Duration(0); sleep.For(ctx, wait) == nil; wait = p.cfg.Delay {
		if _, err := p.poll(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("poll failed", zap.Error(err))
		}
	}
	return nil
}
