package cdc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// harness is one test's slice of the stack: its own database, slot, publication and topics,
// and a consumer that records every delivery record that reaches the topics.
type harness struct {
	t        testing.TB
	url      string
	pool     *pgxpool.Pool
	brokers  []string
	cfg      Config
	clientID string
	records  *collector
}

// newHarness prepares a test on the shared Kafka (brokers nil) or on the given brokers (a
// private Kafka; the relay then creates the topics itself).
func newHarness(t testing.TB, brokers []string) *harness {
	t.Helper()
	return newHarnessOn(t, brokers, stacktest.PostgresURL(t))
}

// newHarnessOn is newHarness on the database at url.
func newHarnessOn(t testing.TB, brokers []string, url string) *harness {
	t.Helper()
	// The relay's own statements and a test's concurrent inserters, planned as herald serve's
	// relay pool plans (pgpool.ByKey).
	pcfg, err := pgpool.NewConfig(url, 16, pgpool.ByKey())
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	topics := map[herald.Priority]string{}
	var events string
	if brokers == nil {
		brokers = stacktest.KafkaBrokers(t)
		names := stacktest.KafkaTopics(t, map[string]int32{"high": 3, "normal": 2, "low": 1, "events": 2})
		topics = map[herald.Priority]string{
			herald.PriorityHigh: names["high"], herald.PriorityNormal: names["normal"], herald.PriorityLow: names["low"],
		}
		events = names["events"]
	} else {
		prefix := stacktest.Name("t")
		for _, p := range herald.Priorities {
			topics[p] = prefix + "." + string(p)
		}
		events = prefix + ".events"
	}
	h := &harness{t: t, url: url, pool: pool, brokers: brokers}
	h.cfg = Config{
		Slot:           stacktest.Name("slot"),
		Publication:    stacktest.Name("pub"),
		Topics:         topics,
		EventsTopic:    events,
		Partitions:     map[herald.Priority]int32{herald.PriorityHigh: 3, herald.PriorityNormal: 2, herald.PriorityLow: 1},
		StatusInterval: time.Second,
		SweepInterval:  200 * time.Millisecond,
		LeaderRetry:    200 * time.Millisecond,
		// Long enough that no test passes by the sweeper's missed-row scan by accident.
		GracePeriod: 10 * time.Minute,
	}
	h.clientID = deliverytest.Client(t, pool)
	h.records = newCollector(t, brokers, topics)
	return h
}

func (h *harness) queryString(sql string, args ...any) string {
	h.t.Helper()
	var s string
	require.NoError(h.t, h.pool.QueryRow(context.Background(), sql, args...).Scan(&s))
	return s
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	_, err := h.pool.Exec(context.Background(), sql, args...)
	require.NoError(h.t, err)
}

// startRelay runs an in-process relay with cfg until the test ends or stop is called. prep
// runs on the relay before it starts.
func (h *harness) startRelay(cfg Config, prep ...func(*Relay)) (stop func()) {
	h.t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.ProducerLinger(0))
	require.NoError(h.t, err)
	// Info, not debug: the relay's per-second status lines would bury a failure's message.
	log := zaptest.NewLogger(h.t, zaptest.Level(zap.InfoLevel))
	r, err := New(cfg, h.pool, kc, log)
	require.NoError(h.t, err)
	for _, p := range prep {
		p(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(h.t, <-done)
			kc.Close()
		})
	}
	h.t.Cleanup(stop)
	h.waitStreaming()
	return stop
}

// waitStreaming waits until a relay streams from the test's slot. An active slot is not
// enough: the slot is active while CREATE_REPLICATION_SLOT still waits for a consistent
// point, and rows committed before that point are not decoded (the sweeper's grace scan
// covers them in production, but a test must not lean on it).
func (h *harness) waitStreaming() {
	h.t.Helper()
	eventually(h.t, 60*time.Second, func() bool {
		var n int
		err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots s
			JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = $1 AND r.state IN ('catchup', 'streaming')`, h.cfg.Slot).Scan(&n)
		return err == nil && n == 1
	}, "no relay streams from slot %s", h.cfg.Slot)
}

// rows describes deliveries to insert.
type rows struct {
	n           int
	priority    herald.Priority
	status      herald.Status // default PENDING
	attempts    int
	dueIn       time.Duration // next_attempt_at = now() + dueIn
	expiresIn   time.Duration // expires_at = now() + expiresIn; 0: none
	traceparent string
}

// insert inserts r in one transaction and returns the delivery ids.
func (h *harness) insert(r rows) []string {
	h.t.Helper()
	ids, err := h.tryInsert(context.Background(), r)
	require.NoError(h.t, err)
	return ids
}

// tryInsert inserts r through the real insert transition (deliverytest), in one transaction.
func (h *harness) tryInsert(ctx context.Context, r rows) ([]string, error) {
	return deliverytest.TryInsert(ctx, h.pool, r.n, deliverytest.Spec{
		ClientID: h.clientID, Template: "t", Category: "c", Priority: r.priority, Status: r.status,
		Attempts: r.attempts, DueIn: r.dueIn, ExpiresIn: r.expiresIn, Traceparent: r.traceparent,
	})
}

func (h *harness) status(id string) herald.Status {
	h.t.Helper()
	return herald.Status(h.queryString(`SELECT status FROM delivery WHERE id = $1`, id))
}

// confirmedFlush returns the slot's confirmed_flush_lsn as a number ("" slot: 0).
func (h *harness) confirmedFlush() uint64 {
	h.t.Helper()
	var lsn uint64
	err := h.pool.QueryRow(context.Background(), `SELECT coalesce((confirmed_flush_lsn - '0/0')::bigint, 0)
		FROM pg_replication_slots WHERE slot_name = $1`, h.cfg.Slot).Scan(&lsn)
	if err != nil {
		return 0
	}
	return lsn
}

func (h *harness) currentWAL() uint64 {
	h.t.Helper()
	var lsn uint64
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT (pg_current_wal_lsn() - '0/0')::bigint`).Scan(&lsn))
	return lsn
}

// eventually is heraldtest.WaitFor with the condition described by msg and args.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	heraldtest.WaitFor(t, timeout, fmt.Sprintf(msg, args...), cond)
}
