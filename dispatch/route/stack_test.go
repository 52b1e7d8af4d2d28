package route

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// stack is one test's herald pipeline on the real local stack: its own database, topics,
// consumer groups and Redis prefix, the real relay (so that a retry due at once is published
// from the WAL, as in production) and dispatchers started by the test.
type stack struct {
	t        testing.TB
	log      *zap.Logger
	dsn      string
	pool     *pgxpool.Pool
	rdb      *redis.Client
	prefix   string
	brokers  []string
	lanes    map[herald.Priority]dispatch.LaneConfig
	clientID string
}

func newStack(t *testing.T) *stack {
	s := newStackTB(t)
	s.log = zaptest.NewLogger(t)
	return s
}

// newStackTB is newStack for a benchmark: it logs nothing.
func newStackTB(t testing.TB) *stack {
	t.Helper()
	dsn := stacktest.PostgresURL(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("pool_max_conns", "40")
	u.RawQuery = q.Encode()
	pool, err := pgpool.New(context.Background(), u.String(), 0)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	rdb, prefix := stacktest.Redis(t)
	names := stacktest.KafkaTopics(t, map[string]int32{"high": 3, "normal": 2, "low": 2})
	s := &stack{t: t, dsn: u.String(), pool: pool, rdb: rdb, prefix: prefix, brokers: stacktest.KafkaBrokers(t),
		lanes: map[herald.Priority]dispatch.LaneConfig{}, clientID: deliverytest.Client(t, pool), log: zap.NewNop()}
	group := stacktest.Name("g")
	topics := map[herald.Priority]string{}
	for p, n := range map[herald.Priority]string{herald.PriorityHigh: "high", herald.PriorityNormal: "normal", herald.PriorityLow: "low"} {
		topics[p] = names[n]
		s.lanes[p] = dispatch.LaneConfig{Topic: names[n], Group: group + "." + n}
	}

	kcl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	slot := stacktest.Name("route")
	relayPool, err := pgpool.New(context.Background(), dsn, 4)
	require.NoError(t, err)
	t.Cleanup(relayPool.Close)
	relay, err := cdc.New(cdc.Config{Slot: slot, Publication: slot, Topics: topics,
		SweepInterval: 100 * time.Millisecond, GracePeriod: time.Second,
		ReapInterval: 200 * time.Millisecond, SendingLease: 3 * time.Second}, relayPool, kcl, zap.NewNop())
	require.NoError(t, err)
	s.run(relay.Run)
	heraldtest.WaitForEvery(t, time.Minute, 2*time.Millisecond, "the relay to stream", func() bool {
		var streaming bool
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1 AND r.state = 'streaming')`,
			slot).Scan(&streaming))
		return streaming
	})
	return s
}

// run runs a component until the test ends; components stop in the reverse order of their
// start.
func (s *stack) run(run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := run(ctx); err != nil {
			s.t.Errorf("component stopped: %v", err)
		}
	}()
	s.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// dispatchConfig is the dispatch config of this stack: short retries, the given limits.
func (s *stack) dispatchConfig(limits map[string]int) dispatch.Config {
	return dispatch.Config{Brokers: s.brokers, Lanes: s.lanes, RedisPrefix: s.prefix, RateLimits: limits,
		RetryPolicies: map[herald.Channel]dispatch.RetryPolicy{
			herald.ChannelSMS: {Base: 100 * time.Millisecond, Max: 500 * time.Millisecond, MaxAttempts: 20}},
		CommitInterval: 50 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
		ClientOptions: []kgo.Opt{kgo.SessionTimeout(6 * time.Second)}}
}

// route builds a router on this stack's Redis over primary (weight 100) and standby (0).
func (s *stack) route(cfg Config, primary, standby dispatch.Sender) *Router {
	cfg.RedisPrefix = s.prefix
	r, err := New(cfg, s.rdb, map[herald.Channel][]Account{herald.ChannelSMS: {
		{Sender: primary, Weight: 100}, {Sender: standby, Weight: 0}}}, s.log)
	require.NoError(s.t, err)
	s.t.Cleanup(func() { _ = r.Close() })
	return r
}

// dispatch starts a dispatcher sending SMS through r.
func (s *stack) dispatch(cfg dispatch.Config, r *Router) {
	d, err := dispatch.New(cfg, s.pool, s.rdb, r.Senders(nil), s.log.Named("dispatch"))
	require.NoError(s.t, err)
	s.run(d.Run)
}

// insert writes n SMS deliveries of priority p, due at once; the relay publishes them.
func (s *stack) insert(n int, p herald.Priority) []string {
	return deliverytest.Insert(s.t, s.pool, n, deliverytest.Spec{ClientID: s.clientID, Channel: herald.ChannelSMS,
		Priority: p, Recipient: `{"phone":"+15550000001"}`})
}

// attempt is one row of the attempt log.
type attempt struct {
	N         int
	Outcome   string
	Provider  string
	StartedAt time.Time
	Finished  time.Time
	NextAt    *time.Time
}

func (s *stack) attempts(id string) []attempt {
	s.t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT attempt, outcome, coalesce(provider, ''), started_at,
		finished_at, next_attempt_at FROM delivery_attempt WHERE delivery_id = $1 ORDER BY attempt`, id)
	require.NoError(s.t, err)
	defer rows.Close()
	var out []attempt
	for rows.Next() {
		var a attempt
		require.NoError(s.t, rows.Scan(&a.N, &a.Outcome, &a.Provider, &a.StartedAt, &a.Finished, &a.NextAt))
		out = append(out, a)
	}
	require.NoError(s.t, rows.Err())
	return out
}

// finished counts the deliveries of ids in a final state, and those SENT.
func (s *stack) finished(ids []string) (final, sent int) {
	s.t.Helper()
	require.NoError(s.t, s.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status IN
		('SENT', 'FAILED', 'EXPIRED', 'CANCELLED')), count(*) FILTER (WHERE status = 'SENT')
		FROM delivery WHERE id = ANY($1)`, ids).Scan(&final, &sent))
	return final, sent
}

// waitSent waits until every delivery of ids is final and requires them all SENT.
func (s *stack) waitSent(d time.Duration, ids []string) {
	s.t.Helper()
	heraldtest.WaitForEvery(s.t, d, 2*time.Millisecond, "every delivery final", func() bool {
		final, _ := s.finished(ids)
		return final == len(ids)
	})
	_, sent := s.finished(ids)
	require.Equal(s.t, len(ids), sent, "every delivery SENT")
}

// recordAttempts reads priority p's topic from its start to its end offsets now and returns,
// per delivery id, the attempt numbers its records were published for (the attempt header):
// a retry that went back to PENDING shows as a record of its attempt, one made in the worker
// that failed does not.
func (s *stack) recordAttempts(p herald.Priority) map[string][]int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := s.lanes[p].Topic
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(s.t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(s.t, err)
	var want, read int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	out := map[string][]int{}
	for read < want {
		f := cl.PollFetches(ctx)
		require.NoError(s.t, ctx.Err(), "read %d of %d records", read, want)
		f.EachRecord(func(r *kgo.Record) {
			read++
			for _, h := range r.Headers {
				if h.Key == herald.HeaderAttempt {
					n, err := strconv.Atoi(string(h.Value))
					require.NoError(s.t, err)
					out[string(r.Key)] = append(out[string(r.Key)], n)
				}
			}
		})
	}
	return out
}
