package events

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// BenchmarkEventToEndpoint measures an event's way from its write to a client's endpoint on
// the real stack, the whole path: a delivery_event row committed (one per transaction, as a
// transition writes it), the relay streaming it from the WAL to Kafka (cdc, the real
// relay), the events role enqueueing it in PostgreSQL and POSTing it, signed, to a local
// endpoint. Latency is from the event's occurred_at (the writing transaction's database
// clock) to the endpoint's receipt. Open loop at BENCH_EVENTS_RATE events/s (default 500)
// for BENCH_EVENTS_SECONDS (default 10); b.N is not used:
//
//	go test ./events/ -run '^$' -bench BenchmarkEventToEndpoint -benchtime 1x
func BenchmarkEventToEndpoint(b *testing.B) {
	rate, seconds := envInt("BENCH_EVENTS_RATE", 500), envInt("BENCH_EVENTS_SECONDS", 10)
	e := newEnv(b)
	client, _ := e.client()
	var mu sync.Mutex
	hist := hdrhistogram.New(1, 600_000_000, 3) // µs
	seen := map[string]bool{}
	rc := newReceiver(b, func(_ int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) })
	rc.answer = func(n int, r *http.Request, w http.ResponseWriter) {
		rc.mu.Lock()
		h := rc.hits[n]
		rc.mu.Unlock()
		var ce struct {
			ID   string    `json:"id"`
			Time time.Time `json:"time"`
		}
		if json.Unmarshal(h.body, &ce) == nil {
			mu.Lock()
			if !seen[ce.ID] {
				seen[ce.ID] = true
				_ = hist.RecordValue(h.at.Sub(ce.Time).Microseconds())
			}
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}
	e.endpoint(client, rc.srv.URL)
	e.startRelay()
	relayed := e.watchRelay(b)
	cfg := e.config()
	r, err := New(cfg, e.pool, apikey.NewWebhookSecrets(e.pool, 0), zaptest.NewLogger(b, zaptest.Level(zap.InfoLevel)))
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); require.NoError(b, <-done) }()

	// Warm up until the relay streams and the endpoint has answered, then until every
	// warm-up event has arrived.
	written := 0
	heraldtest.WaitForEvery(b, 60*time.Second, 500*time.Millisecond, "the first event at the endpoint", func() bool {
		e.writeEvent(client)
		written++
		return len(rc.got()) > 0
	})
	heraldtest.WaitFor(b, time.Minute, "every warm-up event at the endpoint", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= written
	})
	mu.Lock()
	hist.Reset()
	warm := len(seen)
	mu.Unlock()
	relayed.reset()

	b.ResetTimer()
	start := time.Now()
	total := rate * seconds
	const writers = 8
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			t := time.NewTicker(time.Second * writers / time.Duration(rate))
			defer t.Stop()
			for i := w; i < total; i += writers {
				<-t.C
				e.writeEvent(client)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	heraldtest.WaitFor(b, 2*time.Minute, "every event at the endpoint", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)-warm >= total
	})
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	p := func(q float64) float64 { return float64(hist.ValueAtQuantile(q)) / 1000 }
	b.ReportMetric(p(50), "p50-ms")
	b.ReportMetric(p(99), "p99-ms")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
	b.Logf("event written → endpoint received, %d events at %.0f events/s (open loop, one per transaction, one endpoint): p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms",
		hist.TotalCount(), float64(total)/elapsed.Seconds(), p(50), p(90), p(99), p(100))
	rp := relayed.quantiles()
	b.Logf("of which event written → record on Kafka (the relay; the record's timestamp): p50 %.1f ms, p99 %.1f ms", rp[0], rp[1])
}

// relayWatch records, for every record on the events topic, the time from the event's
// occurrence to the record's Kafka timestamp (set by the relay's producer).
type relayWatch struct {
	mu   sync.Mutex
	hist *hdrhistogram.Histogram
}

func (w *relayWatch) reset() { w.mu.Lock(); w.hist.Reset(); w.mu.Unlock() }

func (w *relayWatch) quantiles() [2]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return [2]float64{float64(w.hist.ValueAtQuantile(50)) / 1000, float64(w.hist.ValueAtQuantile(99)) / 1000}
}

func (e *env) watchRelay(b *testing.B) *relayWatch {
	w := &relayWatch{hist: hdrhistogram.New(1, 600_000_000, 3)}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(e.topic), kgo.FetchMaxWait(50*time.Millisecond))
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				if ev, err := parseRecord(r); err == nil {
					w.mu.Lock()
					_ = w.hist.RecordValue(r.Timestamp.Sub(ev.Time).Microseconds())
					w.mu.Unlock()
				}
			})
		}
	}()
	b.Cleanup(func() { cancel(); <-done; cl.Close() })
	return w
}

// writeEvent commits one delivery_event row of client, as a transition does.
func (e *env) writeEvent(client string) {
	d := uuid.Must(uuid.NewV7())
	data := `{"notificationId":"` + d.String() + `","deliveryId":"` + d.String() + `","channel":"SMS","priority":"HIGH","status":"SENT","attempt":1,"sequence":1}`
	_, err := e.pool.Exec(context.Background(), `INSERT INTO delivery_event (id, type, client_id, notification_id, delivery_id, occurred_at, data)
		VALUES (herald_uuidv7(), $1, $2, $3, $3, now(), $4)`, string(herald.EventSent), client, d, data)
	require.NoError(e.t, err)
}

// startRelay runs the real relay on the env's database, its events going to the env's topic,
// and returns once it streams: a row committed before its slot existed would never reach
// Kafka (no sweeper publishes events).
func (e *env) startRelay() {
	e.t.Helper()
	names := stacktest.KafkaTopics(e.t, map[string]int32{"high": 1, "normal": 1, "low": 1})
	slot := stacktest.Name("slot")
	cfg := cdc.Config{Slot: slot, Publication: stacktest.Name("pub"),
		Topics:      map[herald.Priority]string{herald.PriorityHigh: names["high"], herald.PriorityNormal: names["normal"], herald.PriorityLow: names["low"]},
		Partitions:  map[herald.Priority]int32{herald.PriorityHigh: 1, herald.PriorityNormal: 1, herald.PriorityLow: 1},
		EventsTopic: e.topic, EventsPartitions: 3, LeaderRetry: 200 * time.Millisecond}
	kc, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ProducerLinger(0))
	require.NoError(e.t, err)
	relay, err := cdc.New(cfg, e.pool, kc, zaptest.NewLogger(e.t, zaptest.Level(zap.InfoLevel)))
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); require.NoError(e.t, <-done); kc.Close() })
	heraldtest.WaitFor(e.t, time.Minute, "relay streaming", func() bool {
		var streaming bool
		require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1 AND r.state = 'streaming')`, slot).Scan(&streaming))
		return streaming
	})
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
