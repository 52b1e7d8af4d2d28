package relay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/internal/benchproc"
	"github.com/heraldhq/herald/bench/internal/settle"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// generatorConns is the load generator's pool: enough inserts in flight to hold 5,000 rows/s
// at a few milliseconds per insert.
const generatorConns = 32

// system is one relay under test on its own scratch database and topics.
type system struct {
	name string // the figure group: "herald relay", "polling relay"
	pool *pgxpool.Pool
	// accept is the load generator's pool, opened as herald serve opens the API's accept
	// pool (herald-accept): its sessions plan the insert once.
	accept   *pgxpool.Pool
	clientID string
	topics   map[herald.Priority]string
	brokers  []string
	watch    *watcher
	acks     *acks             // when the relay's records were acknowledged
	stages   *stages           // herald's relay only: each record's way out, from the relay
	requests *requests         // herald's relay only: its produce requests
	jit      *settle.BrokerJIT // the broker's compiler threads, once warmUp found them
	// pg and broker are the PostgreSQL server and the local broker's process (0: none), whose
	// CPU each phase reads (cpuUse).
	pg     benchproc.Postgres
	broker int
	// start runs the relay until stop is called; it returns once the relay is ready to
	// publish what is committed from then on.
	start func(tb testing.TB) (stop func())
}

func newSystem(tb testing.TB, name string) *system {
	tb.Helper()
	url := stacktest.PostgresURL(tb)
	names := stacktest.KafkaTopics(tb, map[string]int32{"high": 12, "normal": 6, "low": 2})
	s := &system{
		name:    name,
		pool:    newPool(tb, url, 4),
		accept:  newPool(tb, url, generatorConns, pgpool.ByKey(), pgpool.GenericPlans()),
		brokers: stacktest.KafkaBrokers(tb),
		topics: map[herald.Priority]string{
			herald.PriorityHigh: names["high"], herald.PriorityNormal: names["normal"], herald.PriorityLow: names["low"],
		},
	}
	pg, err := benchproc.FindPostgres(context.Background(), s.pool)
	heraldtest.Must(tb, err)
	s.pg, s.broker = pg, localBrokerPID()
	s.acks = newAcks()
	s.clientID = deliverytest.Client(tb, s.pool)
	s.watch = watch(tb, s.brokers, s.topics)
	return s
}

func newPool(tb testing.TB, url string, conns int32, settings ...map[string]string) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgpool.NewConfig(url, conns, settings...)
	heraldtest.Must(tb, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	heraldtest.Must(tb, err)
	tb.Cleanup(pool.Close)
	return pool
}

// heraldSystem runs herald's relay in this process, as herald serve does (cdc.New with its
// own small pool, its Kafka client without linger for HIGH's records, and NORMAL's and LOW's
// producers), on a replication slot of its own.
func heraldSystem(tb testing.TB) *system {
	tb.Helper()
	s := newSystem(tb, "herald relay")
	s.stages = newStages()
	s.requests = newRequests()
	relayPool := newPool(tb, s.pool.Config().ConnString(), 4, pgpool.ByKey()) // as herald serve opens it
	slot := stacktest.Name("bench")
	s.start = func(tb testing.TB) func() {
		opts := []kgo.Opt{kgo.SeedBrokers(s.brokers...), kgo.WithHooks(s.acks, s.requests)}
		kcl, err := kgo.NewClient(append(opts, kgo.ProducerLinger(0))...)
		heraldtest.Must(tb, err)
		producers, err := cdc.NewProducers(opts...)
		heraldtest.Must(tb, err)
		tb.Cleanup(func() { cdc.CloseProducers(producers) }) // after the relay's stop (run)
		r, err := cdc.New(cdc.Config{Slot: slot, Publication: slot, Topics: s.topics, Producers: producers,
			ObservePublished: s.stages.observe}, relayPool, kcl, zap.NewNop())
		heraldtest.Must(tb, err)
		return run(tb, r.Run, kcl, func() bool { return streaming(tb, s.pool, slot) })
	}
	return s
}

// pollingSystem runs the seed's polling relay (Poller) in this process.
func pollingSystem(tb testing.TB) *system {
	tb.Helper()
	s := newSystem(tb, "polling relay")
	heraldtest.Must(tb, InstallSeedIndex(context.Background(), s.pool))
	relayPool := newPool(tb, s.pool.Config().ConnString(), 2)
	s.start = func(tb testing.TB) func() {
		kcl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ProducerLinger(0), kgo.WithHooks(s.acks))
		heraldtest.Must(tb, err)
		p, err := NewPoller(PollerConfig{Topics: s.topics}, relayPool, kcl, zap.NewNop())
		heraldtest.Must(tb, err)
		return run(tb, p.Run, kcl, func() bool { return true })
	}
	return s
}

// run runs a relay until stop is called, after ready holds.
func run(tb testing.TB, relay func(context.Context) error, kcl *kgo.Client, ready func() bool) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("relay stopped: %v", err)
			}
			kcl.Close()
		})
	}
	tb.Cleanup(stop)
	heraldtest.WaitFor(tb, time.Minute, "relay ready", ready)
	return stop
}

// streaming reports whether a relay streams from slot (or catches up on it). Rows committed
// before the first relay streamed are not decoded by the stream (the sweeper publishes them
// only after its grace period).
func streaming(tb testing.TB, pool *pgxpool.Pool, slot string) bool {
	var ok bool
	err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_replication r
		JOIN pg_replication_slots s ON s.active_pid = r.pid
		WHERE s.slot_name = $1 AND r.state IN ('catchup', 'streaming'))`, slot).Scan(&ok)
	heraldtest.Must(tb, err)
	return ok
}
