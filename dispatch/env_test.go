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
	pool, err := pgxpool.New(context.Background(), u.String())
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
	require.NoError(t, pool.QueryRow(context.Background(), `
		INSERT INTO api_client (id, name, key_prefix, key_hash)
		VALUES (gen_random_uuid(), 'test', 'hk_test', sha256(gen_random_uuid()::text::bytea)) RETURNING id`).Scan(&e.clientID))
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

// delivery describes a row to insert.
type delivery struct {
	Channel   herald.Channel
	Priority  herald.Priority
	ExpiresIn time.Duration // 0: no expiry; negative: already expired
	UserID    int64
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// insert writes a notification and its delivery, PENDING and due, and returns the id.
func (e *env) insert(d delivery) string {
	e.t.Helper()
	return e.insertWith(e.pool, d)
}

// insertWith is insert through q.
func (e *env) insertWith(q querier, d delivery) string {
	e.t.Helper()
	if d.Channel == "" {
		d.Channel = herald.ChannelSMS
	}
	if d.Priority == "" {
		d.Priority = herald.PriorityHigh
	}
	if d.UserID == 0 {
		d.UserID = 42
	}
	ctx := context.Background()
	_, err := q.Exec(ctx, `INSERT INTO user_contact (user_id, email, phone, webhook_url)
		VALUES ($1, 'user@example.com', '+15550100', 'https://hooks.example.com/h') ON CONFLICT DO NOTHING`, d.UserID)
	require.NoError(e.t, err)
	var expires *time.Duration
	if d.ExpiresIn != 0 {
		expires = &d.ExpiresIn
	}
	var id string
	err = q.QueryRow(ctx, `
		WITH n AS (
			INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template, category,
			                          payload, priority, expires_at, response)
			VALUES (gen_random_uuid(), $1, gen_random_uuid()::text, '\x00', $2, 'otp', 'security',
			        '{"code":"123456"}', $3, now() + $4::interval, '{}')
			RETURNING id, expires_at)
		INSERT INTO delivery (id, notification_id, channel, priority, expires_at)
		SELECT gen_random_uuid(), n.id, $5, $3, n.expires_at FROM n RETURNING id`,
		e.clientID, d.UserID, d.Priority, expires, d.Channel).Scan(&id)
	require.NoError(e.t, err)
	return id
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
		v, err := herald.DeliveryMessage{DeliveryID: id, NotificationID: nid, Channel: herald.Channel(ch),
			Priority: herald.Priority(prio), Attempts: attempts}.Marshal()
		require.NoError(e.t, err)
		byID[id] = &kgo.Record{Topic: e.topics[herald.Priority(prio)], Key: []byte(id), Value: v,
			Headers: []kgo.RecordHeader{
				{Key: herald.HeaderTraceparent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
				{Key: herald.HeaderDeliveryID, Value: []byte(id)},
				{Key: herald.HeaderAttempt, Value: []byte(fmt.Sprint(attempts + 1))},
			}}
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

// sweep stands in for the relay's sweeper until the test ends: every 20 ms it publishes
// PENDING rows that are due and marks them QUEUED with a CAS on (status, attempts, still
// due): a row deferred meanwhile by a worker must stay PENDING for a later sweep.
func (e *env) sweep() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rows, err := e.pool.Query(ctx, `SELECT id, attempts FROM delivery WHERE status = 'PENDING' AND next_attempt_at <= now()`)
			if err != nil {
				continue
			}
			type due struct {
				id       string
				attempts int
			}
			var ds []due
			for rows.Next() {
				var d due
				if rows.Scan(&d.id, &d.attempts) == nil {
					ds = append(ds, d)
				}
			}
			rows.Close()
			for _, d := range ds {
				e.publish(d.id)
				_, _ = e.pool.Exec(ctx, `UPDATE delivery SET status = 'QUEUED'
					WHERE id = $1 AND status = 'PENDING' AND attempts = $2 AND next_attempt_at <= now()`, d.id, d.attempts)
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); wg.Wait() })
}

// reap is the relay's reaper with a zero lease: SENDING rows go back to PENDING with an
// AMBIGUOUS attempt row. It returns how many rows it reaped.
func (e *env) reap() int {
	e.t.Helper()
	tag, err := e.pool.Exec(context.Background(), `
		WITH r AS (
			UPDATE delivery SET status = 'PENDING', next_attempt_at = now(), last_error = 'reaped: worker lease expired'
			WHERE status = 'SENDING' RETURNING id, attempts)
		INSERT INTO delivery_attempt (delivery_id, attempt, started_at, outcome, error)
		SELECT id, attempts, now(), 'AMBIGUOUS', 'reaped' FROM r`)
	require.NoError(e.t, err)
	return int(tag.RowsAffected())
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

// insertN inserts n deliveries like d in one statement and returns their ids.
func (e *env) insertN(n int, d delivery) []string {
	e.t.Helper()
	if d.Channel == "" {
		d.Channel = herald.ChannelSMS
	}
	if d.Priority == "" {
		d.Priority = herald.PriorityHigh
	}
	if d.UserID == 0 {
		d.UserID = 42
	}
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `INSERT INTO user_contact (user_id, phone) VALUES ($1, '+15550100') ON CONFLICT DO NOTHING`, d.UserID)
	require.NoError(e.t, err)
	rows, err := e.pool.Query(ctx, `
		WITH n AS (
			INSERT INTO notification (id, client_id, idempotency_key, request_hash, user_id, template, category, priority, response)
			SELECT gen_random_uuid(), $1, gen_random_uuid()::text, '\x00', $2, 'promo', 'marketing', $3, '{}'
			FROM generate_series(1, $4)
			RETURNING id)
		INSERT INTO delivery (id, notification_id, channel, priority)
		SELECT gen_random_uuid(), n.id, $5, $3 FROM n RETURNING id`, e.clientID, d.UserID, d.Priority, n, d.Channel)
	require.NoError(e.t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(e.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(e.t, rows.Err())
	return ids
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
