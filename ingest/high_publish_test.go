package ingest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/openapitest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// An accepted HIGH delivery due at once is on the HIGH topic when its POST has been answered,
// with the relay's record contract (key, headers, value) and a traceparent in the request's
// trace; a NORMAL one, a HIGH one due later (sendAt) and a replayed request publish nothing.
func TestAcceptedHighIsPublishedAtOnce(t *testing.T) {
	t.Parallel()
	topic := stacktest.KafkaTopics(t, map[string]int32{"high": 1})["high"]
	kcl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	e := newEnvWith(t, Config{}, zaptest.NewLogger(t), PublishHigh(kcl, topic))
	e.template("otp", "auth", "SMS")

	body := func(prio herald.Priority, extra string) string {
		return fmt.Sprintf(`{"userId":1,"template":"otp","priority":%q,"channels":["SMS"],"to":{"phone":"+15550000001"}%s}`, prio, extra)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	post := func(key, b string) string {
		res := e.do(http.MethodPost, "/api/notifications", b, map[string]string{"Idempotency-Key": key,
			"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
		require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
		return res.json(t)["deliveries"].([]any)[0].(map[string]any)["id"].(string)
	}
	high := post("high", body(herald.PriorityHigh, ""))
	post("high", body(herald.PriorityHigh, "")) // the replay: nothing new committed
	post("normal", body(herald.PriorityNormal, ""))
	post("later", body(herald.PriorityHigh, `,"sendAt":"2099-01-01T00:00:00Z"`))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, kcl.Flush(ctx)) // every record the API handed over is acknowledged or failed

	recs := readTopic(ctx, t, topic)
	require.Len(t, recs, 1, "one record: the HIGH delivery due at once")
	r := recs[0]
	require.Equal(t, high, string(r.Key))
	msg, err := herald.UnmarshalDeliveryMessage(r.Value)
	require.NoError(t, err)
	require.Equal(t, high, msg.DeliveryID)
	require.Equal(t, herald.PriorityHigh, msg.Priority)
	require.Equal(t, herald.ChannelSMS, msg.Channel)
	require.Zero(t, msg.Attempts)
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	require.Equal(t, high, headers[herald.HeaderDeliveryID])
	require.Equal(t, "1", headers[herald.HeaderAttempt])
	require.Regexp(t, "^00-"+traceID+"-[0-9a-f]{16}-01$", headers[herald.HeaderTraceparent])
}

// readTopic returns every record of topic up to its end offsets now.
func readTopic(ctx context.Context, t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < want {
		f := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records", len(out), want)
		out = append(out, f.Records()...)
	}
	return out
}

// TestHighIsPublishedBeforeItsFlushAndAnsweredAfter: in a process that publishes HIGH, a
// HIGH accept due at once writes with delivery.InsertPromptDurable (the prompt insert and the
// wait for its flush in one pipeline: its Prepare is what a tracer sees of it) and hands its
// record to Kafka before the pipeline returns and the 202 goes out; a replay of it waits for
// the flush (delivery.AwaitDurable). A NORMAL accept, and a HIGH one due later, insert
// durably and wait for nothing else. Seen in the order of the API's statements (a pgx tracer
// on its pool) and of the records the producer buffered (a kgo hook).
func TestHighIsPublishedBeforeItsFlushAndAnsweredAfter(t *testing.T) {
	t.Parallel()
	topic := stacktest.KafkaTopics(t, map[string]int32{"high": 1})["high"]
	var steps stepLog
	kcl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...), kgo.ProducerLinger(0), kgo.WithHooks(&steps))
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	cfg, err := pgxpool.ParseConfig(stacktest.PostgresURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = &steps
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	api, err := New(Config{}, pool, zaptest.NewLogger(t), PublishHigh(kcl, topic))
	require.NoError(t, err)
	srv := httptest.NewServer(openapitest.Handler(t, api.Handler()))
	t.Cleanup(srv.Close)
	c, err := apikey.CreateAPIClient(context.Background(), pool, "test", apikey.AllScopes())
	require.NoError(t, err)
	e := &env{t: t, api: api, pool: pool, srv: srv, clientID: c.ID, key: c.Key}
	e.template("otp", "auth", "SMS")

	post := func(key string, prio herald.Priority, extra string) []string {
		steps.reset()
		res := e.do(http.MethodPost, "/api/notifications",
			fmt.Sprintf(`{"userId":1,"template":"otp","priority":%q,"channels":["SMS"],"to":{"phone":"+15550000001"}%s}`, prio, extra),
			map[string]string{"Idempotency-Key": key})
		require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
		return steps.taken()
	}
	require.Equal(t, []string{"read", "insert without waiting for its flush", "record buffered"},
		post("high", herald.PriorityHigh, ""))
	require.Equal(t, []string{"read", "wait for the flush"}, post("high", herald.PriorityHigh, ""),
		"a replay answers once what it replays is durable")
	require.Equal(t, []string{"read", "insert"}, post("normal", herald.PriorityNormal, ""))
	require.Equal(t, []string{"read", "insert"}, post("later", herald.PriorityHigh, `,"sendAt":"2099-01-01T00:00:00Z"`),
		"a HIGH due later is not published, and its insert is durable")
}

// stepLog records, in order, the statements of a traced pool (pgx.QueryTracer,
// pgx.BatchTracer and pgx.PrepareTracer, named by step) and the records a producer buffered
// (a kgo hook).
type stepLog struct {
	mu    sync.Mutex
	steps []string
}

func (l *stepLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, s)
}

func (l *stepLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = nil
}

func (l *stepLog) taken() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.steps)
}

// step names a statement of the accept by its SQL; "" for one that is not the accept's
// (the API's key lookup).
func step(sql string) string {
	switch {
	case strings.Contains(sql, "pg_logical_emit_message"):
		return "wait for the flush"
	case strings.Contains(sql, "INSERT INTO notification") && strings.Contains(sql, "'synchronous_commit', 'off'"):
		return "insert without waiting for its flush"
	case strings.Contains(sql, "INSERT INTO notification"):
		return "insert"
	case strings.Contains(sql, "LEFT JOIN idempotency_key"):
		return "read"
	}
	return ""
}

type stepSQL struct{}

func (l *stepLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, stepSQL{}, d.SQL)
}

func (l *stepLog) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if s := step(ctx.Value(stepSQL{}).(string)); s != "" && d.Err == nil {
		l.add(s)
	}
}

// TracePrepareStart records the prompt insert, which InsertPromptDurable prepares (a no-op
// once the connection has it) right before its pipeline.
func (l *stepLog) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if s := step(d.SQL); s == "insert without waiting for its flush" {
		l.add(s)
	}
	return ctx
}

func (l *stepLog) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

func (l *stepLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *stepLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if s := step(d.SQL); s != "" && d.Err == nil {
		l.add(s)
	}
}

func (l *stepLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// OnProduceRecordBuffered implements kgo.HookProduceRecordBuffered.
func (l *stepLog) OnProduceRecordBuffered(*kgo.Record) { l.add("record buffered") }

// TestHandedHighIsNotPublished: with HandHigh, each HIGH record due at once goes to the hand
// first, with the record's contract (value, headers); one the hand takes is not published,
// one it refuses is published as without it.
func TestHandedHighIsNotPublished(t *testing.T) {
	t.Parallel()
	topic := stacktest.KafkaTopics(t, map[string]int32{"high": 1})["high"]
	kcl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	var mu sync.Mutex
	var handed []*kgo.Record
	take := true
	hand := func(rec *kgo.Record) bool {
		mu.Lock()
		defer mu.Unlock()
		handed = append(handed, rec)
		return take
	}
	e := newEnvWith(t, Config{}, zaptest.NewLogger(t), PublishHigh(kcl, topic), HandHigh(hand))
	e.template("otp", "auth", "SMS")
	post := func(key string) string {
		res := e.do(http.MethodPost, "/api/notifications",
			`{"userId":1,"template":"otp","priority":"HIGH","channels":["SMS"],"to":{"phone":"+15550000001"}}`,
			map[string]string{"Idempotency-Key": key})
		require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
		return res.json(t)["deliveries"].([]any)[0].(map[string]any)["id"].(string)
	}
	taken := post("taken")
	mu.Lock()
	take = false
	mu.Unlock()
	refused := post("refused")

	mu.Lock()
	require.Len(t, handed, 2, "every HIGH record goes to the hand first")
	for i, id := range []string{taken, refused} {
		msg, err := herald.UnmarshalDeliveryMessage(handed[i].Value)
		require.NoError(t, err)
		require.Equal(t, id, msg.DeliveryID)
		require.Equal(t, topic, handed[i].Topic)
	}
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, kcl.Flush(ctx))
	recs := readTopic(ctx, t, topic)
	require.Len(t, recs, 1, "only the record the hand refused is published")
	require.Equal(t, refused, string(recs[0].Key))
}
