// Package e2e holds herald's end-to-end benchmarks: the ingest API, the CDC relay and the
// dispatch lanes run in this process against the real local PostgreSQL, Kafka and Redis;
// only the provider is an in-memory recorder, so that the figures measure herald itself.
//
//	make stack-up && eval "$(deploy/local/stack.sh env)"
//	go test -run '^$' -bench HighLatency -benchtime 1x -timeout 30m ./bench/e2e
package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/cdc"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/campaign"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/redrive"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders"
)

const provider = "sms:bench"

// stack is one herald (ingest + relay + dispatch) running in this process.
type stack struct {
	pool *pgxpool.Pool
	url  string
	// highURL is where HIGH POSTs go: the HIGH process's API (highAPI); "": url.
	highURL string
	key     string
	sender  *dispatch.MemorySender
	high    *highChild // the HIGH dispatch process (options.highProcess); nil: HIGH runs here
	events  string     // the status events' topic (docs/events.md)
	slot    string     // the relay's replication slot
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// options shape one benchmark's herald.
type options struct {
	limit        int // SMS provider calls per second; 0: unlimited
	concurrency  map[herald.Priority]int
	poolConns    int32 // the ingest and dispatch pool
	expander     bool  // also run the campaign expander, as every ingest process does
	campaignRate int   // the expander's pace in deliveries/s; 0: herald's default, -1: unpaced
	redrive      bool  // also run the re-drive executor, as every ingest process does
	redriveRate  int   // the executor's pace in deliveries/s; 0: herald's default, -1: unpaced
	redriveLot   int   // the executor's lot size; 0: herald's default
	// tracer is what herald's spans go to; nil: a provider that keeps nothing.
	tracer *sdktrace.TracerProvider
	// eventsOff: herald's sessions write no status events (herald serve --events=false).
	// BENCH_EVENTS=off sets it for every benchmark, to compare with a herald from before the
	// status events.
	eventsOff bool
	// highProcess: the HIGH lane runs in a process of its own with a CPU share of its own
	// (high_process_test.go), this process's dispatcher NORMAL and LOW.
	highProcess bool
	// handler, when set, wraps the API's handler (a scenario's timing of its requests).
	handler func(http.Handler) http.Handler
	// dispatchOff: no dispatch lane runs in this process (the rows stay QUEUED), for a
	// scenario that measures writing rows alone.
	dispatchOff bool
}

func startStack(b *testing.B, o options) *stack {
	b.Helper()
	if o.tracer == nil {
		o.tracer = sdktrace.NewTracerProvider()
	}
	otel.SetTracerProvider(o.tracer)
	ctx, cancel := context.WithCancel(context.Background())
	// Pools as herald serve sizes them: one for ingest, one for the expander, one for dispatch
	// with a connection per lane worker and four more, a small one for the relay.
	dbURL := stacktest.PostgresURL(b)
	if o.eventsOff || os.Getenv("BENCH_EVENTS") == "off" {
		dbURL = withEventsOff(b, dbURL)
	}
	s := &stack{pool: newPool(b, dbURL, o.poolConns), cancel: cancel}
	relayPool := newPool(b, dbURL, 4, pgpool.ByKey()) // as herald serve opens them
	workers := 4
	for p, l := range dispatch.DefaultLanes {
		if n := o.concurrency[p]; n > 0 {
			l.Concurrency = n
		}
		workers += l.Concurrency
	}
	dispatchPool := newPool(b, dbURL, int32(workers), pgpool.ByKey())
	b.Cleanup(s.stop)
	topics := stacktest.KafkaTopics(b, map[string]int32{"high": 12, "normal": 6, "low": 2, "events": cdc.DefaultEventsPartitions})
	s.events = topics["events"]
	rdb, prefix := stacktest.Redis(b)
	log := zap.NewNop()

	byPriority := map[herald.Priority]string{
		herald.PriorityHigh: topics["high"], herald.PriorityNormal: topics["normal"], herald.PriorityLow: topics["low"],
	}
	var apiOpts []ingest.Option
	var handTo func(*kgo.Record) bool // set before anything runs
	if publishHigh() {                // as herald serve's --publish-high, with its producer options
		hcl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(b)...), kgo.ProducerLinger(0),
			kgo.RecordDeliveryTimeout(ingest.HighPublishTimeout), kgo.MaxBufferedRecords(ingest.HighPublishBuffer))
		heraldtest.Must(b, err)
		b.Cleanup(hcl.Close)
		apiOpts = append(apiOpts, ingest.PublishHigh(hcl, byPriority[herald.PriorityHigh]))
		if handHigh() { // the HIGH lane of this process's dispatcher, when it runs one (built below)
			apiOpts = append(apiOpts, ingest.HandHigh(func(rec *kgo.Record) bool { return handTo != nil && handTo(rec) }))
		}
	}
	// HIGH POSTs' own connections, opened before serving, as herald serve's (ingest.HighPool).
	highPool := newPool(b, dbURL, int32(ingest.Config{}.HighReserve(int(o.poolConns))))
	heraldtest.Must(b, pgpool.Warm(context.Background(), highPool, int(highPool.Config().MaxConns)))
	apiOpts = append(apiOpts, ingest.HighPool(highPool))
	api, err := ingest.New(ingest.Config{}, s.pool, log, apiOpts...)
	heraldtest.Must(b, err)
	h := api.Handler()
	if o.handler != nil {
		h = o.handler(h)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	s.url = srv.URL
	client, err := apikey.CreateAPIClient(ctx, s.pool, "bench", []apikey.Scope{apikey.ScopeOperator})
	heraldtest.Must(b, err)
	s.key = client.Key
	_, err = s.pool.Exec(ctx, `INSERT INTO template (name, category, channels) VALUES ('bench', 'bench', '{SMS}')`)
	heraldtest.Must(b, err)

	kcl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(b)...), kgo.ProducerLinger(0))
	heraldtest.Must(b, err)
	b.Cleanup(kcl.Close)
	slot := stacktest.Name("bench")
	s.slot = slot
	// The adaptive limits, as herald serve runs them by default (--adaptive-limits).
	ctl, err := adapt.New(adapt.Config{Prefix: prefix, Targets: adapt.Targets{Tolerance: adaptiveTolerance(b)}}, rdb, log)
	heraldtest.Must(b, err)
	// limits is what the background work follows: the controller, or with BENCH_ADAPTIVE=off
	// (herald serve --adaptive-limits=false) none, every limit at its ceiling.
	limits := ctl
	if adaptiveOff() {
		limits = nil
	}
	// The status events' producer, as herald serve makes it (--relay-events-linger);
	// BENCH_EVENTS_LINGER sets its linger, 0 for none.
	linger := cdc.DefaultEventsLinger
	if v := os.Getenv("BENCH_EVENTS_LINGER"); v != "" {
		linger, err = time.ParseDuration(v)
		heraldtest.Must(b, err)
	}
	ecl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(b)...), kgo.ProducerLinger(linger))
	heraldtest.Must(b, err)
	b.Cleanup(ecl.Close)
	producers, err := cdc.NewProducers(kgo.SeedBrokers(stacktest.KafkaBrokers(b)...))
	heraldtest.Must(b, err)
	b.Cleanup(func() { cdc.CloseProducers(producers) })
	relay, err := cdc.New(cdc.Config{Slot: slot, Publication: slot, Topics: byPriority, EventsTopic: topics["events"],
		EventsKafka: ecl, Producers: producers, ObserveLag: ctl.ObserveRelayLag}, relayPool, kcl, log)
	heraldtest.Must(b, err)

	s.sender = &dispatch.MemorySender{ProviderName: provider}
	lanes := map[herald.Priority]dispatch.LaneConfig{}
	for p, t := range byPriority {
		lanes[p] = dispatch.LaneConfig{Topic: t, Group: t + ".group", Concurrency: o.concurrency[p]}
	}
	rateLimits := map[string]int{}
	if o.limit > 0 {
		rateLimits[provider] = o.limit
	}
	var run []herald.Priority
	if o.highProcess {
		run = []herald.Priority{herald.PriorityNormal, herald.PriorityLow}
		hl := dispatch.DefaultLanes[herald.PriorityHigh]
		hl.Concurrency = cmp.Or(o.concurrency[herald.PriorityHigh], hl.Concurrency)
		s.high = startHighChild(b, highChildConfig{DatabaseURL: dbURL, PoolConns: int32(hl.Concurrency) + 4,
			Brokers: stacktest.KafkaBrokers(b), Topic: lanes[herald.PriorityHigh].Topic, Group: lanes[herald.PriorityHigh].Group,
			Concurrency: hl.Concurrency, RateLimits: rateLimits, Provider: provider, RedisAddr: redisAddr(b), Prefix: prefix, BackendNice: backendNice(),
			API: highAPI(), APIConns: o.poolConns})
		s.highURL = s.high.url
	}
	d, err := dispatch.New(dispatch.Config{
		Brokers:     stacktest.KafkaBrokers(b),
		Lanes:       lanes,
		Run:         run,
		RateLimits:  rateLimits,
		RedisPrefix: prefix,
		Adapt:       limits,
	}, dispatchPool, rdb, map[herald.Channel]dispatch.Sender{herald.ChannelSMS: s.sender}, log)
	heraldtest.Must(b, err)
	handTo = d.Hand // false while HIGH runs in a process of its own: this one has no HIGH lane

	runs := []func(context.Context) error{relay.Run, ctl.Run}
	if !o.dispatchOff {
		runs = append(runs, d.Run)
	}
	if o.expander {
		// A pool of its own, as herald serve gives it (apart from the API's admission slots).
		x, err := campaign.NewExpander(campaign.ExpanderConfig{Rate: o.campaignRate, Adapt: limits}, newPool(b, dbURL, 2), log)
		heraldtest.Must(b, err)
		runs = append(runs, x.Run)
	}
	if o.redrive {
		x, err := redrive.New(redrive.Config{Rate: o.redriveRate, LotSize: o.redriveLot, Adapt: limits}, s.pool, log)
		heraldtest.Must(b, err)
		runs = append(runs, x.Run)
	}
	for _, run := range runs {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := run(ctx); err != nil {
				b.Errorf("component stopped: %v", err)
			}
		}()
	}
	// Rows committed before the slot exists reach Kafka through the sweeper only, after its
	// grace period: wait for the relay to stream.
	heraldtest.WaitFor(b, time.Minute, "relay streaming", func() bool {
		var streaming bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid
			WHERE s.slot_name = $1 AND r.state = 'streaming')`, slot).Scan(&streaming)
		heraldtest.Must(b, err)
		return streaming
	})
	return s
}

// settle lets a scenario's setup finish before its clock starts: a CHECKPOINT writes the
// pages the setup dirtied (bulk inserts, VACUUM ANALYZE), and the relay's walsender reads the
// WAL up to that point, so that neither the flush of the setup's pages nor the decoding of
// its rows falls in the measured phase. Without it, the first seconds of a phase measured the
// setup: HIGH's accepts waited behind the setup's WAL writes (docs/benchmarks.md).
func (s *stack) settle(b testing.TB) {
	b.Helper()
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `CHECKPOINT`)
	heraldtest.Must(b, err)
	var lsn string
	heraldtest.Must(b, s.pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(&lsn))
	heraldtest.WaitFor(b, 2*time.Minute, "the relay's walsender past the setup's WAL", func() bool {
		var past bool
		heraldtest.Must(b, s.pool.QueryRow(ctx, `SELECT coalesce(bool_or(r.sent_lsn >= $2::pg_lsn), false)
			FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid
			WHERE s.slot_name = $1`, s.slot, lsn).Scan(&past))
		return past
	})
}

// publishHigh says whether the in-process ingest publishes its HIGH deliveries right after
// the commit (herald serve's --publish-high, on by default): BENCH_PUBLISH_HIGH=false runs a
// scenario with the relay's records only, to compare the two side by side.
// adaptiveOff: BENCH_ADAPTIVE=off runs a benchmark's background work (NORMAL and LOW lanes,
// expander, re-drive) without adaptive limits, as herald serve --adaptive-limits=false, to
// compare with the default side by side.
func adaptiveOff() bool { return os.Getenv("BENCH_ADAPTIVE") == "off" }

// adaptiveTolerance is BENCH_ADAPTIVE_TOLERANCE, herald serve's --adaptive-high-tolerance
// (default 0: off).
func adaptiveTolerance(b *testing.B) float64 {
	v := os.Getenv("BENCH_ADAPTIVE_TOLERANCE")
	if v == "" {
		return adapt.DefaultTolerance
	}
	f, err := strconv.ParseFloat(v, 64)
	heraldtest.Must(b, err)
	return f
}

func publishHigh() bool {
	v, err := strconv.ParseBool(os.Getenv("BENCH_PUBLISH_HIGH"))
	return err != nil || v
}

// handHigh says whether an API that publishes HIGH hands its records to the HIGH lane of the
// same process first, as herald serve's --hand-high (BENCH_HAND_HIGH, default on).
func handHigh() bool {
	v, err := strconv.ParseBool(os.Getenv("BENCH_HAND_HIGH"))
	return err != nil || v
}

func (s *stack) stop() {
	s.cancel()
	s.wg.Wait()
}

// insertBacklog writes n LOW SMS deliveries straight into the database, in transactions of
// 10,000 rows, as a campaign would after its ingest.
func (s *stack) insertBacklog(b *testing.B, n int) {
	b.Helper()
	s.insertBacklogAs(b, n, herald.PriorityLow)
}

// insertBacklogAs is insertBacklog with another priority (and, given, another status with
// one attempt made): each transaction inserts one delivery through the real insert and
// clones it (deliverytest.Backlog).
func (s *stack) insertBacklogAs(b *testing.B, n int, prio herald.Priority, status ...herald.Status) {
	b.Helper()
	var clientID string
	heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT id FROM api_client LIMIT 1`).Scan(&clientID))
	st, attempts := herald.StatusPending, 0
	if len(status) > 0 {
		st, attempts = status[0], 1
	}
	for from := 0; from < n; from += 10000 {
		deliverytest.Backlog(b, s.pool, min(10000, n-from), deliverytest.Spec{ClientID: clientID, UserID: 1,
			Template: "bench", Category: "bench", Recipient: `{"phone":"+15550000000"}`, Channel: herald.ChannelSMS, Priority: prio,
			Status: st, Attempts: attempts})
	}
}

// post sends one notification through the API and returns its delivery id.
func (s *stack) post(b *testing.B, key string, priority herald.Priority) string {
	id, err := s.tryPost(key, priority)
	heraldtest.Must(b, err)
	return id
}

// tryPost is post for a goroutine other than the benchmark's: it returns the error.
func (s *stack) tryPost(key string, priority herald.Priority) (string, error) {
	body := fmt.Sprintf(`{"userId":7,"template":"bench","priority":%q,"channels":["SMS"],`+
		`"payload":{"code":"123456"},"to":{"phone":"+15550000001"}}`, priority)
	var out struct {
		Deliveries []struct{ ID string } `json:"deliveries"`
	}
	if err := s.request(http.MethodPost, "/api/notifications", key, body, http.StatusAccepted, &out); err != nil {
		return "", err
	}
	if len(out.Deliveries) != 1 {
		return "", fmt.Errorf("POST: %d deliveries", len(out.Deliveries))
	}
	return out.Deliveries[0].ID, nil
}

// request makes one API call with the benchmark's key (and key as its Idempotency-Key, if
// any), wants status want, and decodes the answer into out (nil: not read).
func (s *stack) request(method, path, key, body string, want int, out any) error {
	req, err := http.NewRequest(method, s.url+path, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	return nil
}

// BenchmarkHighLatencyUnderLowBacklog measures, for HIGH notifications, the time from the
// API call to the provider call while a LOW campaign drains at the provider's limit.
func BenchmarkHighLatencyUnderLowBacklog(b *testing.B) {
	const (
		backlog  = 100_000
		limit    = 500
		highRate = 20 // HIGH notifications per second
		measure  = 30 * time.Second
	)
	// LOW gets more workers than its default 2: each delivery makes two commits, and at the
	// default the lane drains below its 60 % share of the provider limit.
	s := startStack(b, options{limit: limit, poolConns: 32, concurrency: map[herald.Priority]int{
		herald.PriorityHigh: 12, herald.PriorityNormal: 6, herald.PriorityLow: 8}})

	var mu sync.Mutex
	called := map[string]time.Time{}
	s.sender.OnCall = func(m *senders.Message) {
		if m.Priority == herald.PriorityHigh {
			mu.Lock()
			called[m.DeliveryID] = time.Now()
			mu.Unlock()
		}
	}

	t0 := time.Now()
	s.insertBacklog(b, backlog)
	inserted := time.Since(t0)
	// The campaign is in Kafka and draining at the provider's limit once the relay has
	// published every row; measure HIGH from then on.
	heraldtest.WaitFor(b, 5*time.Minute, "LOW backlog published", func() bool {
		var pending int
		// Rows still in the version the campaign wrote: not yet published and marked QUEUED.
		// (A rate-limit deferral also makes a row PENDING, with a future next_attempt_at.)
		heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery
			WHERE status = 'PENDING' AND attempts = 0 AND next_attempt_at = created_at`).Scan(&pending))
		return pending == 0
	})
	b.Logf("LOW backlog of %d: inserted in %s, published to Kafka %s after the insert began",
		backlog, inserted.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))

	b.ResetTimer()
	started := map[string]time.Time{}
	tick := time.NewTicker(time.Second / highRate)
	defer tick.Stop()
	end := time.Now().Add(measure)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		t0 := time.Now()
		id := s.post(b, fmt.Sprintf("high-%d", i), herald.PriorityHigh)
		started[id] = t0
	}
	heraldtest.WaitFor(b, time.Minute, "every HIGH delivery sent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(called) >= len(started)
	})
	b.StopTimer()

	hist := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	mu.Lock()
	for id, t0 := range started {
		_ = hist.RecordValue(called[id].Sub(t0).Microseconds())
	}
	mu.Unlock()
	calls := s.sender.Calls()
	lowSent := 0
	for _, c := range calls {
		if c.Message.Priority == herald.PriorityLow {
			lowSent++
		}
	}
	ms := func(q float64) float64 { return float64(hist.ValueAtQuantile(q)) / 1000 }
	b.ReportMetric(ms(50), "p50-ms")
	b.ReportMetric(ms(99), "p99-ms")
	b.ReportMetric(float64(hist.Max())/1000, "max-ms")
	b.ReportMetric(float64(maxInWindow(calls, time.Second)), "max-calls/1s-window")
	b.Logf("HIGH API call → provider call over %d notifications at %d/s, LOW backlog %d at limit %d/s: "+
		"p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; %d LOW sent meanwhile; at most %d calls in any 1 s window",
		len(started), highRate, backlog, limit, ms(50), ms(90), ms(99), float64(hist.Max())/1000, lowSent,
		maxInWindow(calls, time.Second))
}

// liftedConcurrency is the NORMAL lane's concurrency where limits are lifted: four claim
// batches of maxClaimBatch (64) in flight. With 64, one batch at a time, the lane waited on
// each batch's claim and outcome commits with a core idle, and the drain ran at 3,900–4,000
// deliveries/s where 256 ran at 5,000–9,000 in the same hour (docs/benchmarks.md, "A lane
// that waits on its own commits").
const liftedConcurrency = 256

// BenchmarkThroughputLimitsLifted measures how many deliveries per second herald completes
// end to end (relay, Kafka, claim, provider call, outcome) with no rate limit and a provider
// that answers at once: a 100,000-delivery NORMAL backlog, from the first provider call to
// the last delivery SENT.
func BenchmarkThroughputLimitsLifted(b *testing.B) {
	const backlog = 100_000
	s := startStack(b, options{poolConns: 80, concurrency: map[herald.Priority]int{
		herald.PriorityHigh: 4, herald.PriorityNormal: liftedConcurrency, herald.PriorityLow: 4}})
	called := s.countCalls()
	b.ResetTimer()
	before := s.dbStats(b)
	s.insertBacklogAs(b, backlog, herald.PriorityNormal)
	s.waitAllSent(b, called, backlog)
	b.StopTimer()
	s.logDBStats(b, before, backlog)
	var first, last time.Time
	heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT min(created_at), max(sent_at) FROM delivery`).Scan(&first, &last))
	calls := s.sender.Calls()
	span := calls[len(calls)-1].At.Sub(calls[0].At)
	b.ReportMetric(float64(backlog)/last.Sub(first).Seconds(), "deliveries/s")
	b.Logf("%d NORMAL deliveries, no rate limit, zero-latency provider, NORMAL lane concurrency %d: "+
		"%.0f deliveries/s from the first insert to the last SENT (%s); provider calls %d over %s",
		backlog, liftedConcurrency, float64(backlog)/last.Sub(first).Seconds(), last.Sub(first).Round(time.Millisecond),
		len(calls), span.Round(time.Millisecond))
}

// maxInWindow returns the most calls that fall in any window of length w.
func maxInWindow(calls []dispatch.Call, w time.Duration) int {
	ts := make([]time.Time, len(calls))
	for i, c := range calls {
		ts[i] = c.At
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// dbStats is the benchmark database's activity so far (pg_stat_database).
type dbStats struct{ commits, returned, fetched, inserted, updated int64 }

func (s *stack) dbStats(b *testing.B) dbStats {
	b.Helper()
	var st dbStats
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	heraldtest.Must(b, err)
	heraldtest.Must(b, s.pool.QueryRow(ctx, `SELECT xact_commit, tup_returned, tup_fetched, tup_inserted, tup_updated
		FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&st.commits, &st.returned, &st.fetched, &st.inserted, &st.updated))
	return st
}

// logDBStats logs the database work per delivery since before: commits (of every session,
// the backlog's own inserts included), rows read and rows written. The counters reach
// pg_stat_database when each session flushes its statistics (within a second or so), so
// they are approximate.
func (s *stack) logDBStats(b *testing.B, before dbStats, n int) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Second)
	after := s.dbStats(b)
	for time.Now().Before(deadline) { // let idle sessions flush
		time.Sleep(500 * time.Millisecond)
		after = s.dbStats(b)
	}
	per := func(a, b int64) float64 { return float64(a-b) / float64(n) }
	b.Logf("database per delivery: %.2f commits, %.1f rows returned by scans, %.1f rows fetched by index, "+
		"%.2f rows inserted, %.2f rows updated", per(after.commits, before.commits), per(after.returned, before.returned),
		per(after.fetched, before.fetched), per(after.inserted, before.inserted), per(after.updated, before.updated))
}

func newPool(b *testing.B, url string, conns int32, settings ...map[string]string) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgpool.NewConfig(url, conns, settings...)
	heraldtest.Must(b, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	heraldtest.Must(b, err)
	b.Cleanup(pool.Close)
	return pool
}

// countCalls counts the provider calls from now on, in process.
func (s *stack) countCalls() *atomic.Int64 {
	var n atomic.Int64
	s.sender.OnCall = func(*senders.Message) { n.Add(1) }
	return &n
}

// waitAllSent waits until called counts n provider calls, then until the n deliveries are
// SENT. The figures come from the rows' own timestamps; the wait reads the call counter and
// not the table, whose count over every row, polled while the drain runs, cost the database
// 30 ms a poll at 100,000 rows (15 µs per delivery at a poll every 500 ms).
func (s *stack) waitAllSent(b *testing.B, called *atomic.Int64, n int) {
	b.Helper()
	heraldtest.WaitFor(b, 10*time.Minute, "every delivery sent to the provider", func() bool { return called.Load() >= int64(n) })
	// The outcome commits after the call: poll the database only once the calls are in.
	heraldtest.WaitFor(b, time.Minute, "every delivery SENT", func() bool {
		var sent int
		heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE status = 'SENT'`).Scan(&sent))
		return sent == n
	})
}
