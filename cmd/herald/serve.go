package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/campaign"
	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/partition"
	"github.com/heraldhq/herald/internal/redrive"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

var allRoles = []string{"ingest", "relay", "dispatch", "events"}

type serveConfig struct {
	commonConfig
	Roles           []string
	HTTPAddr        string
	AdminAddr       string
	KafkaBrokers    []string
	Kafka           kafkaConn
	RedisAddr       string
	Redis           redisConn
	ShutdownTimeout time.Duration
	Ingest          ingest.Config
	// ingestPriorities is --ingest-priorities, parsed into Ingest.Priorities by validate.
	ingestPriorities []string
	PublishHigh      bool
	HandHigh         bool
	Expander         campaign.ExpanderConfig
	Redrive          redrive.Config
	TemplatesDir     string
	Topics           topicConfig
	Relay            relayFlags
	Events           eventsFlags
	Endpoints        endpointFlags
	Partitions       partition.Config
	Dispatch         dispatchFlags
	Groups           groupFlags
	Senders          senderFlags
	Routing          routeFlags
	Console          consoleFlags
	Receipts         receiptFlags
	Adapt            adaptFlags
}

func (c *serveConfig) register(f *envFlags) {
	c.commonConfig.register(f)
	f.Strings(&c.Roles, "roles", allRoles, "roles this process runs: ingest, relay, dispatch, events (delivers status events to webhook endpoints)")
	f.String(&c.HTTPAddr, "http-addr", "127.0.0.1:8080", "address of the HTTP API, /healthz and /readyz")
	f.String(&c.AdminAddr, "admin-addr", "127.0.0.1:9090", "address of /metrics, /debug/pprof/ and the probes, unauthenticated: keep it private; empty disables")
	f.Strings(&c.KafkaBrokers, "kafka-brokers", []string{"127.0.0.1:59092"}, "Kafka seed brokers")
	c.Kafka.register(f)
	f.String(&c.RedisAddr, "redis-addr", "127.0.0.1:56379", "Redis address")
	c.Redis.register(f)
	f.Duration(&c.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "how long a shutdown may take, whatever is in flight: work still running then is abandoned and the process exits non-zero")
	f.String(&c.TemplatesDir, "templates-dir", "", "directory of NAME.json templates (the body of PUT /api/templates/NAME) stored at start-up")
	f.Duration(&c.Ingest.AuthCacheTTL, "auth-cache-ttl", ingest.DefaultAuthCacheTTL, "how long a valid API key is remembered, and so how long a revoked key may still work; negative disables the cache")
	f.Int(&c.Ingest.AdmissionSlots, "admission-slots", 0, "POST /api/notifications requests that may do database work at once; the others wait for a slot; 0: --database-max-conns")
	f.Int(&c.Ingest.AdmissionHighReserve, "admission-high-reserve", 0, "admission slots only HIGH requests may take; 0: max(1, slots/4)")
	f.Duration(&c.Ingest.AdmissionWait, "admission-wait", ingest.DefaultAdmissionWait, "how long a NORMAL or LOW POST /api/notifications waits for an admission slot before it is answered 503 overloaded")
	f.Strings(&c.ingestPriorities, "ingest-priorities", []string{"HIGH", "NORMAL", "LOW"}, "priorities this process's API accepts; "+
		"another is answered 422 priority_not_accepted. HIGH alone makes it an OTP pool's API, which runs no campaign expander and no re-drive executor")
	f.Bool(&c.PublishHigh, "publish-high", ingest.DefaultPublishHigh, "an ingest process publishes each HIGH delivery it accepts to Kafka right after the commit, the relay's record from the WAL being the guarantee; false: the relay's only")
	f.Bool(&c.HandHigh, "hand-high", true, "an ingest process that also runs dispatch's HIGH lane hands each HIGH delivery it accepts to that lane in process, without Kafka, when a worker slot is free, instead of publishing it (needs --publish-high)")
	f.Int(&c.Expander.Rate, "campaign-rate", campaign.DefaultRate, "deliveries per second this process writes when it expands campaigns, leaving CPU and WAL bandwidth to HIGH; -1: unpaced")
	f.Int(&c.Redrive.Rate, "redrive-rate", redrive.DefaultRate, "deliveries per second this process re-arms when it executes re-drives, paced like campaign expansion; -1: unpaced")
	f.Int(&c.Redrive.LotSize, "redrive-lot-size", redrive.DefaultLotSize, "matched deliveries a re-drive reads and re-arms per transaction (1-10000): a smaller lot is a shorter burst of writes and WAL ahead of HIGH, a larger one costs less per delivery")
	f.Int(&c.Ingest.RedriveMax, "redrive-max", redrive.DefaultMax, "most deliveries one re-drive may match; POST /api/redrives answers 422 redrive_too_large beyond")
	c.Topics.register(f)
	c.Relay.register(f)
	c.Events.register(f)
	c.Endpoints.register(f)
	f.Duration(&c.Partitions.Retention, "retention", partition.DefaultRetention, "how long notifications, deliveries and attempts are kept (whole days); a day is dropped only when all its deliveries are final")
	f.Int(&c.Partitions.Ahead, "partitions-ahead", partition.DefaultAhead, "days after today whose partitions are created ahead")
	f.Duration(&c.Partitions.Interval, "partition-interval", partition.DefaultInterval, "time between two partition passes (create ahead, drop past the retention)")
	c.Dispatch.register(f)
	c.Groups.register(f)
	c.Senders.register(f)
	c.Routing.register(f)
	c.Console.register(f)
	c.Receipts.register(f)
	c.Adapt.register(f)
}

func (c *serveConfig) validate() error {
	if len(c.Roles) == 0 {
		return errors.New("--roles: at least one role")
	}
	for _, r := range c.Roles {
		if !slices.Contains(allRoles, r) {
			return fmt.Errorf("--roles: unknown role %q (want %v)", r, allRoles)
		}
	}
	if err := c.validateConns(); err != nil {
		return err
	}
	c.Ingest.Priorities = nil
	for _, name := range c.ingestPriorities {
		p, err := herald.ParsePriority(name)
		if err != nil || slices.Contains(c.Ingest.Priorities, p) {
			return fmt.Errorf("--ingest-priorities: %q is not HIGH, NORMAL or LOW, or is named twice", name)
		}
		c.Ingest.Priorities = append(c.Ingest.Priorities, p)
	}
	if len(c.Ingest.Priorities) == 0 {
		return errors.New("--ingest-priorities: no priority named")
	}
	if c.Redrive.LotSize < 1 || c.Redrive.LotSize > redrive.MaxLotSize {
		return fmt.Errorf("--redrive-lot-size %d: must be 1-%d", c.Redrive.LotSize, redrive.MaxLotSize)
	}
	if c.Events.Partitions < 1 {
		return fmt.Errorf("--events-partitions %d: at least 1", c.Events.Partitions)
	}
	c.Events.apply(c)
	if _, err := c.Endpoints.config(*c); err != nil {
		return err
	}
	if err := c.Senders.validate(c.has("dispatch")); err != nil {
		return err
	}
	// Every role knows which channels the installation delivers: ingest suppresses the
	// others (channel_unavailable), dispatch has a provider for each.
	chans, err := c.Senders.channels()
	if err != nil {
		return err
	}
	c.Ingest.Channels, c.Expander.Channels = chans, chans
	// The rules between components (herald.Topology: the SENDING lease outlasts a worker's
	// hold, distinct topics and groups, valid names). Relay and dispatch may run in different
	// processes, so every process checks the topology it is configured with, whatever its roles.
	dc, err := c.Dispatch.config(c.Topics, c.KafkaBrokers, c.ShutdownTimeout)
	if err != nil {
		return err
	}
	if err := c.topology(dc.SendingHold()).Validate(); err != nil {
		return fmt.Errorf("%w (--topic-*, --dispatch-group-*, --relay-slot, --relay-publication, --redis-prefix, --relay-sending-lease, --send-timeout)", err)
	}
	return nil
}

// topology is what the relay and dispatch flags say the components share.
func (c *serveConfig) topology(hold time.Duration) herald.Topology {
	t := herald.Topology{Topics: map[herald.Priority]string{}, Groups: map[herald.Priority]string{},
		Slot: c.Relay.cfg.Slot, Publication: c.Relay.cfg.Publication, RedisPrefix: c.Groups.redisPrefix,
		SendingLease: c.Relay.cfg.SendingLease, SendingHold: hold}
	for _, p := range herald.Priorities {
		t.Topics[p], t.Groups[p] = *c.Topics.Names[p], *c.Groups.groups[p]
	}
	return t.WithDefaults()
}

func (c *serveConfig) has(role string) bool { return slices.Contains(c.Roles, role) }

func runServe(ctx context.Context, args []string) error {
	var c serveConfig
	f := newFlags("serve")
	c.register(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	log, err := newLogger(c.LogLevel, c.LogFormat)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	// Deferred first, so it runs last: the watchdog covers the closes and flushes below.
	wd := newWatchdog(log, c.ShutdownTimeout)
	defer wd.finish()

	tel, err := setupTelemetry(ctx, version)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tel.shutdown(ctx); err != nil {
			log.Warn("telemetry shutdown", zap.Error(err))
		}
	}()

	pool, err := openPool(ctx, c.commonConfig, "herald")
	if err != nil {
		return err
	}
	defer pool.Close()
	if res, err := migrate.Up(ctx, pool); err != nil {
		return err
	} else if len(res) > 0 {
		log.Info("migrations applied", zap.Int("count", len(res)))
	}
	if c.TemplatesDir != "" {
		names, err := ingest.SeedTemplates(ctx, pool, os.DirFS(c.TemplatesDir))
		if err != nil {
			return fmt.Errorf("seed templates from %s: %w", c.TemplatesDir, err)
		}
		log.Info("templates seeded", zap.String("dir", c.TemplatesDir), zap.Strings("names", names))
	}

	rx, err := newReceiver(c, pool, log)
	if err != nil {
		return err
	}
	if c.has("ingest") {
		c.Ingest.Receipts = receiptHandlers(rx, log)
	}
	apiOpts, closeHigh, err := highPublisher(c)
	if err != nil {
		return err
	}
	defer closeHigh()
	// The HIGH lane of this process's dispatcher (--hand-high), set once it is built, before
	// anything runs.
	var handHigh func(*kgo.Record) bool
	if c.HandHigh && len(apiOpts) > 0 && c.has("dispatch") {
		apiOpts = append(apiOpts, ingest.HandHigh(func(rec *kgo.Record) bool { return handHigh != nil && handHigh(rec) }))
	}
	if c.has("ingest") {
		hp, err := highAcceptPool(ctx, c)
		if err != nil {
			return err
		}
		if hp != nil {
			defer hp.Close()
			apiOpts = append(apiOpts, ingest.HighPool(hp))
		}
		if !c.Ingest.HighOnly() {
			ap, err := acceptPool(ctx, c)
			if err != nil {
				return err
			}
			defer ap.Close()
			apiOpts = append(apiOpts, ingest.AcceptPool(ap))
		}
	}
	api, err := ingest.New(c.Ingest, pool, log, apiOpts...)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	if c.has("ingest") {
		mux.Handle("/", api.Handler())
	} else { // the probes only: the same answers as an ingest process
		mux.Handle("/healthz", api.Handler())
		mux.Handle("/readyz", api.Handler())
	}
	if c.Console.Enabled {
		con, closeConsole, err := newConsole(c, pool, log)
		if err != nil {
			return err
		}
		defer closeConsole()
		mux.Handle("/console/", con)
	}

	// Every component is built before any goroutine starts: a component that fails to build
	// must not leave the others running without an owner.
	var runs []component
	ctl, closeAdapt, err := newAdapt(&c, log)
	if err != nil {
		return err
	}
	defer closeAdapt()
	if ctl != nil {
		runs = append(runs, component{"adaptive limits", ctl.Run})
	}
	if c.has("ingest") {
		// An OTP pool's process (--ingest-priorities HIGH) writes no campaign lots and
		// re-arms no re-drive: that work would take the CPU reserved for HIGH.
		if !c.Ingest.HighOnly() {
			xpool, err := expanderPool(ctx, c)
			if err != nil {
				return err
			}
			defer xpool.Close()
			x, err := campaign.NewExpander(c.Expander, xpool, log)
			if err != nil {
				return err
			}
			runs = append(runs, component{"campaign expander", x.Run})
			rdx, err := redrive.New(c.Redrive, pool, log)
			if err != nil {
				return err
			}
			runs = append(runs, component{"re-drive executor", rdx.Run})
		}
		runs = append(runs, component{"held receipts", rx.Run})
	}
	if c.has("relay") {
		relay, closeRelay, err := newRelay(ctx, c, log)
		if err != nil {
			return err
		}
		defer closeRelay()
		runs = append(runs, component{"relay", relay.Run})
		api.ReadyWhen("relay", func(context.Context) error { return relay.Ready() })
		// Daily partitions: one process at a time (an advisory lock) among the relays.
		pm, err := partition.New(c.Partitions, pool, log)
		if err != nil {
			return err
		}
		runs = append(runs, component{"partitions", pm.Run})
	}
	if c.has("dispatch") {
		d, closeDispatch, err := newDispatcher(ctx, c, log)
		if err != nil {
			return err
		}
		defer closeDispatch()
		handHigh = d.Hand
		runs = append(runs, component{"dispatch", d.Run})
		api.ReadyWhen("dispatch", d.Ready)
	}
	if c.has("events") {
		ev, closeEvents, err := newEventsRole(ctx, c, log)
		if err != nil {
			return err
		}
		defer closeEvents()
		runs = append(runs, component{"events", ev.Run})
	}
	g, ctx := errgroup.WithContext(ctx)
	wd.start(ctx)
	drain := drainTimeout(c.ShutdownTimeout)
	g.Go(func() error {
		defer wd.track("http requests")()
		return serveHTTP(ctx, log, "http", c.HTTPAddr, mux, drain)
	})
	if c.AdminAddr != "" {
		g.Go(func() error {
			defer wd.track("admin requests")()
			return serveHTTP(ctx, log, "admin", c.AdminAddr, adminHandler(tel.metrics, api.Handler()), drain)
		})
	}
	names := make([]string, len(runs))
	for i, run := range runs {
		names[i] = run.name
		g.Go(func() error {
			defer wd.track(run.name)()
			return run.run(ctx)
		})
	}
	log.Info("connections", c.connFields()...)
	log.Info("herald started", zap.Strings("roles", c.Roles), zap.Strings("components", names), zap.String("http_addr", c.HTTPAddr),
		zap.String("admin_addr", c.AdminAddr), zap.String("version", version))
	err = g.Wait()
	wd.track("closing connections and flushing telemetry") // until the process ends
	if errors.Is(err, errAbandoned) || errors.Is(err, dispatch.ErrAbandoned) {
		log.Error("shutdown abandoned work", zap.Error(err))
	}
	log.Info("herald stopped")
	return err
}

// component is a named Run of the process.
type component struct {
	name string
	run  func(context.Context) error
}

// serveHTTP serves h on addr until ctx ends, then stops accepting and gives in-flight
// requests up to drain to finish. Requests still running then have their context cancelled
// (so that a query waiting on a lock gives its connection back) and are cut off: the error
// wraps errAbandoned and says how many.
func serveHTTP(ctx context.Context, log *zap.Logger, name, addr string, h http.Handler, drain time.Duration) error {
	requests, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	var inFlight atomic.Int64
	srv := &http.Server{
		Addr: addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			h.ServeHTTP(w, r)
		}),
		BaseContext:       func(net.Listener) context.Context { return requests },
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s server on %s: %w", name, addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	log.Info("http server draining", zap.String("server", name), zap.Duration("timeout", drain))
	if err := srv.Shutdown(sctx); err != nil {
		n := inFlight.Load()
		cancelRequests()
		_ = srv.Close()
		<-errc
		return fmt.Errorf("%s server: in-flight requests cut off: %d: %w", name, n, errAbandoned)
	}
	<-errc
	return nil
}

// adminHandler serves the admin listener: Prometheus metrics, pprof and the probes. It is
// meant for a private address (default loopback): nothing on it asks for a key.
func adminHandler(metrics, api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/healthz", api)
	mux.Handle("/readyz", api)
	return mux
}

// highPublisher is the producer of an ingest process's direct HIGH publish (--publish-high):
// no linger, and records bounded in number and life, so that an absent Kafka never holds a
// request (the relay's record from the WAL is the guarantee).
func highPublisher(c serveConfig) ([]ingest.Option, func(), error) {
	if !c.has("ingest") || !c.PublishHigh {
		return nil, func() {}, nil
	}
	kopts, err := c.Kafka.options(c.KafkaBrokers)
	if err != nil {
		return nil, nil, err
	}
	kcl, err := kgo.NewClient(append(kopts, kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(ingest.HighPublishTimeout),
		kgo.MaxBufferedRecords(ingest.HighPublishBuffer))...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka client: %w", err)
	}
	return []ingest.Option{ingest.PublishHigh(kcl, *c.Topics.Names[herald.PriorityHigh])}, kcl.Close, nil
}

// relayPoolConns sizes the relay's own pool: the marker, the sweeper, the reaper and the lag
// probe. It is separate from the pool of ingest and dispatch so that a busy API or a full
// set of dispatch workers never delays marking rows QUEUED.
const relayPoolConns = 4

func newRelay(ctx context.Context, c serveConfig, log *zap.Logger) (*cdc.Relay, func(), error) {
	pool, err := openRelayPool(ctx, c.commonConfig)
	if err != nil {
		return nil, nil, err
	}
	kopts, err := c.Kafka.options(c.KafkaBrokers)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	// One producer per priority class (docs/cdc.md, "One producer per priority"), none of
	// them lingering: HIGH's records on the relay's own client, which also serves its metadata
	// requests, NORMAL's and LOW's on clients of their own. The status events have theirs too,
	// whose records may wait to fill batches: the broker's work per event falls with the
	// requests (docs/events.md, "What the events cost").
	kcl, err := kgo.NewClient(append(kopts, kgo.ProducerLinger(0))...)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("kafka client: %w", err)
	}
	producers, err := cdc.NewProducers(kopts...)
	if err != nil {
		kcl.Close()
		pool.Close()
		return nil, nil, err
	}
	ecl, err := kgo.NewClient(append(kopts, kgo.ProducerLinger(c.Relay.eventsLinger))...)
	if err != nil {
		cdc.CloseProducers(producers)
		kcl.Close()
		pool.Close()
		return nil, nil, fmt.Errorf("kafka client for the status events: %w", err)
	}
	closeAll := func() { ecl.Close(); cdc.CloseProducers(producers); kcl.Close(); pool.Close() }
	rcfg := c.Relay.config(c.Topics)
	rcfg.EventsKafka, rcfg.Producers = ecl, producers
	c.Groups.applyRelay(&rcfg)
	relay, err := cdc.New(rcfg, pool, kcl, log)
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("relay: %w", err)
	}
	return relay, closeAll, nil
}

// expanderPoolConns sizes the campaign expander's own pool: its lots and its DONE checks run
// one after the other. Apart from the API's pool, a lot never holds one of the connections the
// admission slots count on (docs/architecture.md "Campaign expansion").
const expanderPoolConns = 2

func expanderPool(ctx context.Context, c serveConfig) (*pgxpool.Pool, error) {
	pc := c.commonConfig
	pc.MaxConns = expanderPoolConns
	return openPool(ctx, pc, "herald-expander")
}

// dispatchPoolSpare is what the dispatch pool holds beyond one connection per worker: the
// webhook-secret look-ups and the lanes' lag probes.
const dispatchPoolSpare = 4

// newDispatcher builds dispatch with a pool of its own, one connection per worker of its lanes
// plus dispatchPoolSpare: a process that also serves the API must not make a HIGH delivery
// wait for a connection behind a burst of POSTs (and the API's pool, --database-max-conns,
// stays the API's).
func newDispatcher(ctx context.Context, c serveConfig, log *zap.Logger) (*dispatch.Dispatcher, func(), error) {
	cfg, err := c.Dispatch.config(c.Topics, c.KafkaBrokers, drainTimeout(c.ShutdownTimeout))
	if err != nil {
		return nil, nil, err
	}
	conns := dispatchPoolSpare
	for _, p := range cfg.Run {
		conns += cfg.Lanes[p].Concurrency
	}
	pool, err := openDispatchPool(ctx, c.commonConfig, conns)
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			pool.Close()
		}
	}()
	c.Groups.applyDispatch(&cfg)
	if err := c.Kafka.applyDispatch(&cfg); err != nil {
		return nil, nil, err
	}
	ropts, err := c.Redis.options(c.RedisAddr)
	if err != nil {
		return nil, nil, err
	}
	routes, closeSenders, err := c.Senders.build(log, apikey.NewWebhookSecrets(pool, 0))
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(ropts)
	var d *dispatch.Dispatcher
	listed := map[herald.Channel]bool{herald.ChannelSMS: c.Senders.SMSProviders != "", herald.ChannelEmail: c.Senders.EmailProviders != ""}
	snd, rt, err := c.Routing.senders(routes, listed, rdb, cfg.RedisPrefix, log)
	if err == nil {
		closeSenders = closeRouter(rt, closeSenders)
		d, err = dispatch.New(cfg, pool, rdb, snd, log)
	}
	if err != nil {
		rdb.Close()
		closeSenders()
		return nil, nil, fmt.Errorf("dispatch: %w", err)
	}
	ok = true
	return d, func() { rdb.Close(); closeSenders(); pool.Close() }, nil
}
