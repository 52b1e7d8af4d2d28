package dispatch

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// env is one test's slice of the real stack: its own database, topics, groups and Redis
// key prefix, and a producer standing in for the relay.
type env struct {
	t        testing.TB
	dsn      string
	pool     *pgxpool.Pool
	rdb      *redis.Client
	prefix   string
	brokers  []string
	topics   map[herald.Priority]string
	producer *kgo.Client
	clientID string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	dsn := stacktest.PostgresURL(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("pool_max_conns", "32")
	u.RawQuery = q.Encode()
	pool, err := pgpool.New(context.Background(), u.String(), 0, pgpool.ByKey()) // as herald serve's dispatch pool
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	rdb, prefix := stacktest.Redis(t)
	names := stacktest.KafkaTopics(t, map[string]int32{"high": 3, "normal": 2, "low": 2})
	e := &env{
		t: t, dsn: u.String(), pool: pool, rdb: rdb, prefix: prefix, brokers: stacktest.KafkaBrokers(t),
		topics: map[herald.Priority]string{
			herald.PriorityHigh: names["high"], herald.PriorityNormal: names["normal"], herald.PriorityLow: names["low"],
		},
	}
	e.producer, err = kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(e.producer.Close)
	e.clientID = deliverytest.Client(t, pool)
	return e
}

// config returns a Config on this env's topics, fresh groups and key prefix.
func (e *env) config() Config {
	lanes := make(map[herald.Priority]LaneConfig)
	group := stacktest.Name("g")
	for p, topic := range e.topics {
		lanes[p] = LaneConfig{Topic: topic, Group: group + "." + string(p)}
	}
	return Config{
		Brokers: e.brokers, Lanes: lanes, RedisPrefix: e.prefix,
		CommitInterval: 50 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
	}
}

// fixture describes a delivery row to insert.
type fixture struct {
	Channel   herald.Channel
	Priority  herald.Priority
	ExpiresIn time.Duration // 0: no expiry; negative: already expired
	DueIn     time.Duration // 0: due at once
	UserID    int64
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// insert writes a notification and its delivery, PENDING and due, and returns the id.
func (e *env) insert(d fixture) string {
	e.t.Helper()
	return e.insertWith(e.pool, d)
}

// insertWith is insert through q.
func (e *env) insertWith(q querier, d fixture) string {
	e.t.Helper()
	return deliverytest.One(e.t, q, e.spec(q, d, "otp", "security", `{"code":"123456"}`))
}

// insertN inserts n deliveries like d in one transaction and returns their ids.
func (e *env) insertN(n int, d fixture) []string {
	e.t.Helper()
	return deliverytest.Insert(e.t, e.pool, n, e.spec(e.pool, d, "promo", "marketing", ""))
}

// spec fills in d's defaults, makes sure its user has a contact, and returns the
// deliverytest spec of it.
func (e *env) spec(q querier, d fixture, template, category, payload string) deliverytest.Spec {
	e.t.Helper()
	if d.Priority == "" {
		d.Priority = herald.PriorityHigh
	}
	if d.UserID == 0 {
		d.UserID = 42
	}
	_, err := q.Exec(context.Background(), `INSERT INTO user_contact (user_id, email, phone, webhook_url)
		VALUES ($1, 'user@example.com', '+15550100', 'https://hooks.example.com/h') ON CONFLICT DO NOTHING`, d.UserID)
	require.NoError(e.t, err)
	return deliverytest.Spec{ClientID: e.clientID, UserID: d.UserID, Template: template, Category: category,
		Payload: payload, Channel: d.Channel, Priority: d.Priority, DueIn: d.DueIn, ExpiresIn: d.ExpiresIn}
}

// publish produces the relay's record for each delivery row, as the relay would.
func (e *env) publish(ids ...string) {
	e.t.Helper()
	recs := e.records(ids...)
	require.NoError(e.t, e.producer.ProduceSync(context.Background(), recs...).FirstErr())
}

// records builds the relay's records for delivery rows, in the order of ids.
func (e *env) records(ids ...string) []*kgo.Record {
	e.t.Helper()
	return e.recordsWith(e.pool, ids...)
}

// recordsWith is records through q.
func (e *env) recordsWith(q querier, ids ...string) []*kgo.Record {
	e.t.Helper()
	rows, err := q.Query(context.Background(),
		`SELECT id, notification_id, channel, priority, attempts FROM delivery WHERE id = ANY($1)`, ids)
	require.NoError(e.t, err)
	defer rows.Close()
	byID := make(map[string]*kgo.Record, len(ids))
	for rows.Next() {
		var (
			id, nid  string
			ch, prio string
			attempts int
		)
		require.NoError(e.t, rows.Scan(&id, &nid, &ch, &prio, &attempts))
		byID[id] = e.record(id, nid, herald.Channel(ch), herald.Priority(prio), attempts)
	}
	require.NoError(e.t, rows.Err())
	recs := make([]*kgo.Record, 0, len(ids))
	for _, id := range ids {
		r, ok := byID[id]
		require.True(e.t, ok, "no delivery %s", id)
		recs = append(recs, r)
	}
	return recs
}

// record is the relay's record of a delivery row.
func (e *env) record(id, nid string, ch herald.Channel, prio herald.Priority, attempts int) *kgo.Record {
	v, err := herald.DeliveryMessage{DeliveryID: id, NotificationID: nid, Channel: ch, Priority: prio, Attempts: attempts}.Marshal()
	if err != nil {
		panic(err) // a struct of strings and ints always encodes
	}
	return &kgo.Record{Topic: e.topics[prio], Key: []byte(id), Value: v,
		Headers: []kgo.RecordHeader{
			{Key: herald.HeaderTraceparent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
			{Key: herald.HeaderDeliveryID, Value: []byte(id)},
			{Key: herald.HeaderAttempt, Value: []byte(fmt.Sprint(attempts + 1))},
		}}
}

// sweep stands in for the relay's sweeper until the test ends: every 20 ms it publishes the
// rows delivery.Due returns (grace period zero: every due PENDING row) and marks what Kafka
// acknowledged QUEUED with delivery.MarkQueued, the relay's compare-and-set: a row a worker
// claimed or deferred meanwhile stays as the worker left it.
func (e *env) sweep() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due, err := delivery.Due(ctx, e.pool, 0, 1000)
			if err != nil || len(due) == 0 {
				continue
			}
			recs := make([]*kgo.Record, len(due))
			vs := make([]delivery.Version, len(due))
			for i, r := range due {
				recs[i] = e.record(r.ID, r.NotificationID, r.Channel, r.Priority, r.Attempts)
				vs[i] = r.Version
			}
			if e.producer.ProduceSync(ctx, recs...).FirstErr() != nil {
				continue
			}
			_, _ = delivery.MarkQueued(ctx, e.pool, vs)
		}
	})
	e.t.Cleanup(func() { cancel(); wg.Wait() })
}

// reap is the relay's reaper with a zero lease (delivery.ReapSending): SENDING rows go back
// to PENDING with an AMBIGUOUS attempt row. It returns how many rows it reaped.
func (e *env) reap() int {
	e.t.Helper()
	reaped, err := delivery.ReapSending(context.Background(), e.pool, 0, 1000)
	require.NoError(e.t, err)
	n := 0
	for _, c := range reaped {
		n += int(c)
	}
	return n
}

// start runs a Dispatcher until the test ends.
func (e *env) start(cfg Config, rdb *redis.Client, ss map[herald.Channel]Sender) *Dispatcher {
	e.t.Helper()
	if rdb == nil {
		rdb = e.rdb
	}
	log := zap.NewNop()
	if tt, ok := e.t.(*testing.T); ok {
		log = zaptest.NewLogger(tt, zaptest.Level(zap.WarnLevel))
	}
	d, err := New(cfg, e.pool, rdb, ss, log)
	require.NoError(e.t, err)
	sig := countSignals(d)
	signalsMu.Lock()
	signalsOf[d] = sig
	signalsMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		require.NoError(e.t, <-done)
	})
	return d
}

// state is a delivery's status and attempts.
func (e *env) state(id string) (herald.Status, int) {
	e.t.Helper()
	var (
		s string
		n int
	)
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT status, attempts FROM delivery WHERE id = $1`, id).Scan(&s, &n))
	return herald.Status(s), n
}

// waitStatus waits until every id has a status in want.
func (e *env) waitStatus(timeout time.Duration, want []herald.Status, ids ...string) {
	e.t.Helper()
	ws := make([]string, len(want))
	for i, s := range want {
		ws[i] = string(s)
	}
	require.Eventually(e.t, func() bool {
		var n int
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE id = ANY($1) AND status = ANY($2)`,
			ids, ws).Scan(&n)
		return err == nil && n == len(ids)
	}, timeout, 10*time.Millisecond, "deliveries did not reach %s", strings.Join(ws, "/"))
}

// attemptRow is one delivery_attempt row.
type attemptRow struct {
	Attempt      int
	Outcome      string
	Code         *string
	FinishedAt   time.Time
	NextAttempt  *time.Time
	ErrorMessage *string
}

func (e *env) attempts(id string) []attemptRow {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT attempt, outcome, provider_code, finished_at, next_attempt_at, error
		FROM delivery_attempt WHERE delivery_id = $1 ORDER BY attempt`, id)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []attemptRow
	for rows.Next() {
		var a attemptRow
		require.NoError(e.t, rows.Scan(&a.Attempt, &a.Outcome, &a.Code, &a.FinishedAt, &a.NextAttempt, &a.ErrorMessage))
		out = append(out, a)
	}
	require.NoError(e.t, rows.Err())
	return out
}

func smsOnly(s Sender) map[herald.Channel]Sender {
	return map[herald.Channel]Sender{herald.ChannelSMS: s}
}

// callTimes returns the sender's calls as admissions (for maxInWindow), with the priority
// of each call.
func callTimes(s *MemorySender) []admission {
	calls := s.Calls()
	out := make([]admission, len(calls))
	for i, c := range calls {
		out[i] = admission{at: c.At, prio: c.Message.Priority}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}
