package events

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/cekafka"
	"github.com/heraldhq/herald/internal/endpoint"
	"github.com/heraldhq/herald/internal/stacktest"
)

// env is one test's slice of the real stack: its own database, events topic and group, and
// a producer standing in for the relay.
type env struct {
	t        testing.TB
	dsn      string
	pool     *pgxpool.Pool
	brokers  []string
	topic    string
	group    string
	producer *kgo.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	dsn := stacktest.PostgresURL(t)
	pcfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	pcfg.MaxConns = 16 // the role, the relay of the benchmark and its writers
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := &env{t: t, dsn: dsn, pool: pool, brokers: stacktest.KafkaBrokers(t),
		topic: stacktest.KafkaTopics(t, map[string]int32{"events": 3})["events"], group: stacktest.Name("g")}
	e.producer, err = kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(e.producer.Close)
	return e
}

// config is a Config on this env's topic and group, with a short schedule and sweep.
func (e *env) config() Config {
	return Config{Brokers: e.brokers, Topic: e.topic, Group: e.group, AllowHTTP: true, AllowLoopback: true,
		RetrySchedule: []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond},
		SweepInterval: 50 * time.Millisecond, Timeout: 5 * time.Second, Lease: 10 * time.Second,
		ShutdownTimeout: 5 * time.Second}
}

// start runs the role until the test ends.
func (e *env) start(cfg Config) *Role {
	e.t.Helper()
	r, err := New(cfg, e.pool, apikey.NewWebhookSecrets(e.pool, 0), zaptest.NewLogger(e.t))
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		require.NoError(e.t, <-done)
	})
	return r
}

// client creates an API client and returns its id and webhook secret.
func (e *env) client() (id, secret string) {
	e.t.Helper()
	c, err := apikey.CreateAPIClient(context.Background(), e.pool, "c", apikey.DefaultScopes())
	require.NoError(e.t, err)
	return c.ID, c.WebhookSecret
}

// endpoint registers an endpoint of client at url.
func (e *env) endpoint(client, url string, types ...herald.EventType) string {
	e.t.Helper()
	ep, err := endpoint.Create(context.Background(), e.pool, client, url, "", types)
	require.NoError(e.t, err)
	return ep.ID
}

// event is a status event of client, occurring now.
func event(client string, t herald.EventType) endpoint.Event {
	id, _ := uuid.NewV7()
	d, _ := uuid.NewV7()
	data, _ := json.Marshal(herald.EventData{NotificationID: d.String(), DeliveryID: d.String(), Channel: herald.ChannelSMS,
		Priority: herald.PriorityHigh, Status: herald.StatusSent, Attempt: 1, Sequence: 1, OccurredAt: time.Now().UTC()})
	return endpoint.Event{ID: id.String(), Type: t, ClientID: client, Subject: d.String(), Time: time.Now().UTC(), Data: data}
}

// publish produces the relay's record of each event: the CloudEvents Kafka binding, binary
// mode (internal/cekafka, what the relay writes).
func (e *env) publish(evs ...endpoint.Event) {
	e.t.Helper()
	recs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
		ce.SetID(ev.ID)
		ce.SetSource(herald.EventSource)
		ce.SetType(string(ev.Type))
		ce.SetSubject(ev.Subject)
		ce.SetTime(ev.Time)
		ce.SetExtension(herald.EventClientExtension, ev.ClientID)
		ce.SetDataContentType(cloudevents.ApplicationJSON)
		ce.DataEncoded = ev.Data
		recs[i] = &kgo.Record{Topic: e.topic, Key: []byte(ev.Subject)}
		require.NoError(e.t, cekafka.Write(context.Background(), &ce, recs[i]))
	}
	require.NoError(e.t, e.producer.ProduceSync(context.Background(), recs...).FirstErr())
}

// hit is one request an endpoint got.
type hit struct {
	at     time.Time
	header http.Header
	body   []byte
}

// receiver is a webhook endpoint: answer decides each response (nil: 204).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(n int, r *http.Request, w http.ResponseWriter) // n counts from 0
}

func newReceiver(t testing.TB, answer func(n int, r *http.Request, w http.ResponseWriter)) *receiver {
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return // cut off (a sender killed mid-request): the endpoint never got it
		}
		rc.mu.Lock()
		n := len(rc.hits)
		rc.hits = append(rc.hits, hit{at: time.Now(), header: r.Header.Clone(), body: b})
		rc.mu.Unlock()
		if rc.answer != nil {
			rc.answer(n, r, w)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) got() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// ids lists the webhook-id of every request, in arrival order.
func (rc *receiver) ids() []string {
	var out []string
	for _, h := range rc.got() {
		out = append(out, h.header.Get("webhook-id"))
	}
	return out
}

// message reads a message's status and attempts.
func (e *env) message(endpointID, eventID string) (status string, attempts int) {
	e.t.Helper()
	err := e.pool.QueryRow(context.Background(), `SELECT status, attempts FROM webhook_message WHERE endpoint_id = $1 AND event_id = $2`,
		endpointID, eventID).Scan(&status, &attempts)
	if err != nil {
		return "", 0
	}
	return status, attempts
}

// results lists the results of the attempts of one message, in order.
func (e *env) results(endpointID, eventID string) []string {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT result FROM webhook_attempt WHERE endpoint_id = $1 AND event_id = $2 ORDER BY attempt`,
		endpointID, eventID)
	require.NoError(e.t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(e.t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(e.t, rows.Err())
	return out
}
