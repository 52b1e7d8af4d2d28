package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/console"
)

// consoleFlags configure the operator console (docs/operations.md).
type consoleFlags struct {
	Enabled    bool
	JaegerURL  string
	SessionTTL time.Duration
}

func (c *consoleFlags) register(f *envFlags) {
	f.Bool(&c.Enabled, "console", true, "serve the operator console under /console (log in with an operator API key)")
	f.String(&c.JaegerURL, "jaeger-url", "", "Jaeger base URL, UI and query API (http://127.0.0.1:16686): timelines link their trace, which the console's trace view reads")
	f.Duration(&c.SessionTTL, "console-session-ttl", console.DefaultSessionTTL, "how long a console login lasts")
}

// newConsole builds the console of serve, with a Kafka admin client of its own for the
// lanes' consumer lag. The returned func closes that client.
func newConsole(c serveConfig, pool *pgxpool.Pool, log *zap.Logger) (http.Handler, func(), error) {
	kopts, err := c.Kafka.options(c.KafkaBrokers)
	if err != nil {
		return nil, nil, err
	}
	kcl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, nil, fmt.Errorf("console kafka client: %w", err)
	}
	dc, err := c.Dispatch.config(c.Topics, c.KafkaBrokers, c.ShutdownTimeout)
	if err != nil {
		kcl.Close()
		return nil, nil, err
	}
	lanes := map[herald.Priority]console.Lane{}
	for _, p := range herald.Priorities {
		lanes[p] = console.Lane{Topic: *c.Topics.Names[p], Group: *c.Groups.groups[p]}
	}
	con, err := console.New(console.Config{JaegerURL: c.Console.JaegerURL, SessionTTL: c.Console.SessionTTL,
		Slot: c.Relay.cfg.Slot, Lanes: lanes, RateLimits: dc.RateLimits, RedriveMax: c.Ingest.RedriveMax}, pool, kadm.NewClient(kcl), log)
	if err != nil {
		kcl.Close()
		return nil, nil, fmt.Errorf("console: %w", err)
	}
	return con.Handler(), kcl.Close, nil
}
