package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders"
)

// The HIGH dispatcher in a process of its own, as a deployment runs it (herald serve --roles
// dispatch --lanes HIGH, with reserved CPU): the benchmark binary starts itself again with
// highChildEnv set, and that process runs dispatch's HIGH lane only, against the same
// database, topic, group, Redis and adaptive-limit board as the in-process herald, whose
// dispatcher then runs NORMAL and LOW. Its CPU share is its own scheduling group's: it starts
// a session of its own (so the kernel's autogroup puts it in a group apart from this process,
// PostgreSQL and Kafka) and the group's nice value is set to highNice, the weight a
// Kubernetes Deployment's reserved CPU gives it. The process reports every provider call (with
// its own clock: the same machine's) and every span of a bench trace on stdout, one JSON object
// a line, so that the scenarios measure HIGH and its stages as before.
const highChildEnv = "BENCH_HIGH_CHILD"

// highProcess says whether a scenario that supports it runs HIGH in a process of its own:
// BENCH_HIGH_PROCESS=false keeps every lane in this process, to compare the two side by side.
func highProcess() bool {
	v, err := strconv.ParseBool(os.Getenv("BENCH_HIGH_PROCESS"))
	return err != nil || v
}

// backendNice is BENCH_HIGH_PG_NICE, the HIGH process's PostgreSQL backends' nice value; nil
// when unset (they are left alone).
func backendNice() *int {
	n, err := strconv.Atoi(os.Getenv("BENCH_HIGH_PG_NICE"))
	if err != nil {
		return nil
	}
	return &n
}

// highProcessNote is what a scenario's load says of where HIGH dispatch runs in s.
func highProcessNote(s *stack) string {
	if s.high == nil {
		return "; HIGH dispatch in the same process as the rest of herald (BENCH_HIGH_PROCESS=false)"
	}
	note := fmt.Sprintf("; HIGH dispatch in a process of its own (herald serve --roles dispatch --lanes HIGH), "+
		"its scheduling group at nice %d", highNice())
	if s.highURL != "" {
		note = fmt.Sprintf("; HIGH's API and dispatch in a process of its own, the OTP pool (herald serve --roles ingest,dispatch "+
			"--lanes HIGH --ingest-priorities HIGH), its scheduling group at nice %d; HIGH POSTs go there", highNice())
	}
	if s.high.shareErr != nil {
		note = fmt.Sprintf("; HIGH dispatch in a process of its own (herald serve --roles dispatch --lanes HIGH), "+
			"at the default CPU weight (its share could not be set: %v)", s.high.shareErr)
	}
	if n := backendNice(); n != nil {
		note += fmt.Sprintf(", its PostgreSQL backends at nice %d", *n)
	}
	return note
}

// highAPI says whether the HIGH process also serves HIGH's API (BENCH_HIGH_API, default on when
// HIGH runs in a process of its own): the OTP pool of a deployment, an ingest process that the
// services sending OTPs call, with the HIGH dispatcher's CPU share (docs/operations.md, "An
// OTP pool"). The benchmark then sends every HIGH POST there and the rest to this process.
// BENCH_HIGH_API=false keeps HIGH's accepts in this process, beside the burst and the
// expander, to compare side by side.
func highAPI() bool {
	v, err := strconv.ParseBool(os.Getenv("BENCH_HIGH_API"))
	return err != nil || v
}

// highNice is the HIGH process's autogroup nice value (-20 to 19; BENCH_HIGH_NICE, default
// -10: a weight of 9,548 against the 1,024 of every other group).
func highNice() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_HIGH_NICE")); err == nil {
		return n
	}
	return -10
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(highChildEnv); cfg != "" {
		os.Exit(runHighChild(cfg))
	}
	if cfg := os.Getenv(loadChildEnv); cfg != "" { // scenario_seedload_client_test.go
		os.Exit(runLoadChild(cfg))
	}
	os.Exit(m.Run())
}

// highChildConfig is what the HIGH process is told through highChildEnv.
type highChildConfig struct {
	DatabaseURL string
	PoolConns   int32
	Brokers     []string
	Topic       string
	Group       string
	Concurrency int
	RateLimits  map[string]int
	Provider    string
	RedisAddr   string
	Prefix      string
	// BackendNice, when set, is the nice value of the PostgreSQL backend of each of the HIGH
	// process's connections (BENCH_HIGH_PG_NICE): the local stack's server runs on this
	// machine, so the backends that accept, claim and record HIGH deliveries can be given the CPU
	// ahead of the expander's, the walsender's and LOW's, to measure how much of HIGH's wait
	// is PostgreSQL's CPU. A managed database offers no such knob.
	BackendNice *int
	// API: the process also serves HIGH's API (highAPI), with a pool of APIConns connections
	// and HIGH's reserve, publishing HIGH to Topic as the accepting process does.
	API      bool
	APIConns int32
}

// childLine is one line the HIGH process writes.
type childLine struct {
	Ready bool       `json:"ready,omitempty"`
	URL   string     `json:"url,omitempty"` // with Ready: the API's base URL, when it serves one
	Call  *childCall `json:"call,omitempty"`
	Span  *childSpan `json:"span,omitempty"`
}

type childCall struct {
	DeliveryID string
	Priority   herald.Priority
	At         time.Time
}

type childSpan struct {
	Name                    string
	TraceID, SpanID, Parent string
	Start, End              time.Time
	Attrs                   map[string]string
	Events                  []childEvent `json:",omitempty"`
}

// childEvent is one event of a span the HIGH process reported.
type childEvent struct {
	Name string
	At   time.Time
}

// highChild is the running HIGH process, seen from the benchmark.
type highChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready atomic.Bool
	url   string        // the API's base URL (set before ready); "" without one
	done  chan struct{} // stdout read to its end

	shareErr error // why the CPU share could not be set; nil: it was

	mu     sync.Mutex
	calls  []dispatch.Call
	onCall func(m *senders.Message, at time.Time)
	spans  []sdktrace.ReadOnlySpan
}

// startHighChild starts the HIGH process and waits until its lane is ready.
func startHighChild(b *testing.B, c highChildConfig) *highChild {
	b.Helper()
	raw, err := json.Marshal(c)
	heraldtest.Must(b, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), highChildEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // a session, so an autogroup, of its own
	h := &highChild{cmd: cmd, done: make(chan struct{})}
	h.stdin, err = cmd.StdinPipe()
	heraldtest.Must(b, err)
	out, err := cmd.StdoutPipe()
	heraldtest.Must(b, err)
	heraldtest.Must(b, cmd.Start())
	go h.read(b, out)
	b.Cleanup(h.stop)
	// Without the right to raise its weight (not root), the process runs at the default weight
	// and the scenario's load says so.
	if err := setAutogroupNice(cmd.Process.Pid, highNice()); err != nil {
		h.shareErr = err
		b.Logf("HIGH process CPU share left at the default: %v", err)
	}
	heraldtest.WaitFor(b, time.Minute, "the HIGH dispatch process ready", h.ready.Load)
	return h
}

// read takes the HIGH process's lines until its stdout closes.
func (h *highChild) read(b *testing.B, out io.Reader) {
	defer close(h.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l childLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			b.Errorf("HIGH process: %v in %q", err, sc.Text())
			continue
		}
		switch {
		case l.Ready:
			h.url = l.URL
			h.ready.Store(true)
		case l.Call != nil:
			m := senders.Message{DeliveryID: l.Call.DeliveryID, Priority: l.Call.Priority, Channel: herald.ChannelSMS}
			h.mu.Lock()
			h.calls = append(h.calls, dispatch.Call{Message: m, At: l.Call.At})
			f := h.onCall
			h.mu.Unlock()
			if f != nil {
				f(&m, l.Call.At)
			}
		case l.Span != nil:
			sp := l.Span.snapshot()
			h.mu.Lock()
			h.spans = append(h.spans, sp)
			h.mu.Unlock()
		}
	}
}

// stop closes the HIGH process's stdin, which ends it, and waits for it.
func (h *highChild) stop() {
	_ = h.stdin.Close()
	<-h.done
	_ = h.cmd.Wait()
}

// snapshot turns a span the HIGH process reported back into a span the stage tracer reads.
func (s childSpan) snapshot() sdktrace.ReadOnlySpan {
	tid, _ := trace.TraceIDFromHex(s.TraceID)
	sid, _ := trace.SpanIDFromHex(s.SpanID)
	pid, _ := trace.SpanIDFromHex(s.Parent)
	var attrs []attribute.KeyValue
	for k, v := range s.Attrs {
		attrs = append(attrs, attribute.String(k, v))
	}
	var events []sdktrace.Event
	for _, ev := range s.Events {
		events = append(events, sdktrace.Event{Name: ev.Name, Time: ev.At})
	}
	return tracetest.SpanStub{Name: s.Name, StartTime: s.Start, EndTime: s.End, Attributes: attrs, Events: events,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
		Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid, TraceFlags: trace.FlagsSampled, Remote: true}),
	}.Snapshot()
}

// calls is every provider call of the stack: this process's and the HIGH process's, in order.
func (s *stack) calls() []dispatch.Call {
	calls := s.sender.Calls()
	if s.high == nil {
		return calls
	}
	s.high.mu.Lock()
	calls = append(calls, s.high.calls...)
	s.high.mu.Unlock()
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].At.Before(calls[j].At) })
	return calls
}

// onCall makes f see every provider call of the stack, with the time it was made.
func (s *stack) onCall(f func(m *senders.Message, at time.Time)) {
	s.sender.OnCall = func(m *senders.Message) { f(m, time.Now()) }
	if s.high != nil {
		s.high.mu.Lock()
		s.high.onCall = f
		s.high.mu.Unlock()
	}
}

// childSpans is what the HIGH process's spans add to the stage tracer's; none without one.
func (s *stack) childSpans() []sdktrace.ReadOnlySpan {
	if s.high == nil {
		return nil
	}
	s.high.mu.Lock()
	defer s.high.mu.Unlock()
	return append([]sdktrace.ReadOnlySpan(nil), s.high.spans...)
}

// childWriter writes the HIGH process's lines; as a span processor, one per ended span of a
// bench trace (the sampler follows the parent: a record of an untraced delivery makes none).
type childWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *childWriter) write(l childLine) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(l)
}

func (w *childWriter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (w *childWriter) OnEnd(sp sdktrace.ReadOnlySpan) {
	attrs := map[string]string{}
	for _, kv := range sp.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	var events []childEvent
	for _, ev := range sp.Events() {
		events = append(events, childEvent{Name: ev.Name, At: ev.Time})
	}
	w.write(childLine{Span: &childSpan{Name: sp.Name(), TraceID: sp.SpanContext().TraceID().String(),
		SpanID: sp.SpanContext().SpanID().String(), Parent: sp.Parent().SpanID().String(),
		Start: sp.StartTime(), End: sp.EndTime(), Attrs: attrs, Events: events}})
}

func (w *childWriter) Shutdown(context.Context) error   { return nil }
func (w *childWriter) ForceFlush(context.Context) error { return nil }

// runHighChild is the HIGH process: dispatch's HIGH lane until stdin closes.
func runHighChild(raw string) int {
	var c highChildConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, "HIGH process config:", err)
		return 2
	}
	if err := runHighLane(c); err != nil {
		fmt.Fprintln(os.Stderr, "HIGH process:", err)
		return 1
	}
	return 0
}

// runHighLane runs the HIGH lane, reporting on stdout, until stdin closes.
func runHighLane(c highChildConfig) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	w := &childWriter{enc: json.NewEncoder(os.Stdout)}
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())),
		sdktrace.WithSpanProcessor(w)))
	cfg, err := pgpool.NewConfig(c.DatabaseURL, c.PoolConns, pgpool.ByKey()) // dispatch's pool, as herald serve opens it
	if err != nil {
		return err
	}
	c.highSessions(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: c.RedisAddr})
	defer rdb.Close()
	log := zap.NewNop()
	ctl, err := adapt.New(adapt.Config{Prefix: c.Prefix}, rdb, log)
	if err != nil {
		return err
	}
	sender := &dispatch.MemorySender{ProviderName: c.Provider, OnCall: func(m *senders.Message) {
		w.write(childLine{Call: &childCall{DeliveryID: m.DeliveryID, Priority: m.Priority, At: time.Now()}})
	}}
	d, err := dispatch.New(dispatch.Config{
		Brokers:     c.Brokers,
		Lanes:       map[herald.Priority]dispatch.LaneConfig{herald.PriorityHigh: {Topic: c.Topic, Group: c.Group, Concurrency: c.Concurrency}},
		Run:         []herald.Priority{herald.PriorityHigh},
		RateLimits:  c.RateLimits,
		RedisPrefix: c.Prefix,
		Adapt:       ctl,
	}, pool, rdb, map[herald.Channel]dispatch.Sender{herald.ChannelSMS: sender}, log)
	if err != nil {
		return err
	}
	var url string
	if c.API {
		srv, err := serveHighAPI(ctx, c, d.Hand)
		if err != nil {
			return err
		}
		defer srv.Close()
		url = srv.URL
	}
	errs := make(chan error, 2)
	go func() { errs <- ctl.Run(ctx) }()
	go func() { errs <- d.Run(ctx) }()
	for d.Ready(ctx) != nil {
		select {
		case err := <-errs:
			return fmt.Errorf("stopped before ready: %w", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	w.write(childLine{Ready: true, URL: url})
	<-ctx.Done()
	for range 2 {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// highApplicationName names the HIGH process's database sessions in pg_stat_activity, so
// that their wait events and their backends' scheduling can be read apart from the rest.
const highApplicationName = "herald-bench-high"

// highSessions names each connection of cfg's pool highApplicationName and gives its backend
// c.BackendNice, when that is set. A PostgreSQL backend calls setsid when it starts, so where
// the kernel schedules sessions as autogroups each backend is an autogroup of its own, and
// its process nice only orders it within that group of one: the nice that counts is its
// autogroup's (/proc/PID/autogroup, as deploy/local/kafka.sh gives the broker's). Both are
// set; where processes are scheduled through cgroups instead, the process nice is the one.
func (c highChildConfig) highSessions(cfg *pgxpool.Config) {
	cfg.ConnConfig.RuntimeParams["application_name"] = highApplicationName
	if c.BackendNice == nil {
		return
	}
	nice := *c.BackendNice
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		var pid int
		if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, pid, nice); err != nil {
			return err
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", pid)); err != nil || len(b) == 0 {
			return nil // no autogroup: a cgroup's task group schedules it
		}
		return setAutogroupNice(pid, nice)
	}
}

// setAutogroupNice sets the nice value of pid's autogroup, its CPU weight against every other
// group (sched(7)); raising it needs root.
func setAutogroupNice(pid, nice int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/autogroup", pid), []byte(strconv.Itoa(nice)), 0)
}

// serveHighAPI serves HIGH's API in the HIGH process, as startStack builds the API: a pool of
// c.APIConns, HIGH's own connections opened before serving, HIGH published at its accept, or
// handed to the process's HIGH lane (hand) as herald serve does.
func serveHighAPI(ctx context.Context, c highChildConfig, hand func(*kgo.Record) bool) (*httptest.Server, error) {
	newPool := func(conns int32) (*pgxpool.Pool, error) {
		cfg, err := pgpool.ParseConfig(c.DatabaseURL)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = conns
		c.highSessions(cfg)
		return pgxpool.NewWithConfig(ctx, cfg)
	}
	pool, err := newPool(c.APIConns)
	if err != nil {
		return nil, err
	}
	highPool, err := newPool(int32(ingest.Config{}.HighReserve(int(c.APIConns))))
	if err != nil {
		return nil, err
	}
	if err := pgpool.Warm(ctx, highPool, int(highPool.Config().MaxConns)); err != nil {
		return nil, err
	}
	opts := []ingest.Option{ingest.HighPool(highPool)}
	if publishHigh() {
		hcl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.ProducerLinger(0),
			kgo.RecordDeliveryTimeout(ingest.HighPublishTimeout), kgo.MaxBufferedRecords(ingest.HighPublishBuffer))
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, hcl.Close)
		opts = append(opts, ingest.PublishHigh(hcl, c.Topic))
		if handHigh() {
			opts = append(opts, ingest.HandHigh(hand))
		}
	}
	api, err := ingest.New(ingest.Config{}, pool, zap.NewNop(), opts...)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(api.Handler())
	context.AfterFunc(ctx, func() { pool.Close(); highPool.Close() })
	return srv, nil
}

// the address of the stack's Redis, for the HIGH process.
func redisAddr(b *testing.B) string {
	b.Helper()
	addr := os.Getenv(stacktest.EnvRedis)
	if addr == "" {
		b.Fatalf("%s is not set", stacktest.EnvRedis)
	}
	return addr
}
