package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/bench/internal/benchproc"
	"github.com/heraldhq/herald/bench/internal/pgbench"
	"github.com/heraldhq/herald/bench/internal/settle"
	benchresult "github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// Ingest scenario settings (see docs/benchmarks.md).
const (
	heraldPool      = 16 // herald's --database-max-conns: as many connections as pgbench has
	closedConns     = 32 // load generator connections, closed loop
	openConns       = 64 // load generator connections (most requests in flight), open loop
	maxRounds       = 5  // pgbench and the closed loop alternate in this many slices
	phaseAtScaleOne = 10 * time.Second
)

// BenchmarkScenarioIngest measures herald's POST /api/notifications against pgbench of the
// same SQL (ingest/testdata/pgbench_accept.sql) in one run: `herald serve --roles ingest` as
// a child process on a scratch database; pgbench and this load generator in a closed loop
// alternate in slices (10 s each at BENCH_SCALE=1, 5 slices), so that the machine's other
// load hits both alike; then the load generator open loop at half the closed-loop rate:
// latency counted from when each request was due. Targets: POST/s ≥ 0.6 × pgbench tx/s and
// p99 ≤ 25 ms at half rate. BENCH_HERALD_BIN measures a prebuilt herald (A/B comparisons).
func BenchmarkScenarioIngest(b *testing.B) {
	// At least 2 s: pgbench spends part of a shorter slice connecting its clients.
	phase := max(time.Duration(float64(phaseAtScaleOne)*benchresult.Scale()), 2*time.Second).Round(time.Second)
	rounds := min(max(int(phase/(2*time.Second)), 1), maxRounds)
	slice := phase / time.Duration(rounds)
	pgbenchBin, script := pgbench.Find(b), pgbench.AcceptScript(b)
	r := benchresult.New("ingest", "POST /api/notifications against pgbench of the same SQL")
	r.Load = fmt.Sprintf("pgbench (%d clients) and the load generator closed loop (%d connections) alternating, %d slice(s) of %s each; "+
		"then the load generator open loop at half the closed-loop rate for %s (%d connections at most); "+
		"each request: one notification, two deliveries (SMS, EMAIL), stored contacts", pgbench.Clients, closedConns, rounds, slice, phase, openConns)

	dbURL := stacktest.PostgresURL(b)
	ctx := context.Background()
	pgbench.Prepare(b, dbURL)
	pool, err := pgpool.New(ctx, dbURL, 0)
	heraldtest.Must(b, err)
	b.Cleanup(pool.Close)
	client, err := apikey.CreateAPIClient(ctx, pool, "bench", []apikey.Scope{apikey.ScopeOperator})
	heraldtest.Must(b, err)
	server, err := benchproc.FindPostgres(ctx, pool)
	if err != nil {
		b.Fatalf("the CPU breakdown reads PostgreSQL's processes: %v", err)
	}
	pool.Close()

	bin := benchproc.BuildHerald(b)
	addr := heraldtest.FreeAddr(b)
	herald := benchproc.Start(b, bin, "serve", "--roles", "ingest", "--http-addr", addr, "--admin-addr", "",
		"--database-url", dbURL, "--database-max-conns", strconv.Itoa(heraldPool), "--log-level", "warn")
	herald.WaitFor(b, time.Minute, 100*time.Millisecond, "herald ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	o := options{url: &url.URL{Scheme: "http", Host: addr}, key: client.Key, template: "otp", users: 1000, priority: "NORMAL"}
	warm := o
	warm.duration, warm.concurrency = time.Second, closedConns
	if _, err := run(warm); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	// The suite runs this after the relay scenario, whose scratch databases autovacuum may
	// still be at: its workers would count as PostgreSQL's CPU in whichever slice they ran.
	waited := settle.Cluster(b, dbURL, time.Minute)
	fmt.Fprintf(os.Stderr, "[ingest] the cluster settled in %s (a CHECKPOINT, no autovacuum worker at work)\n", waited.Round(100*time.Millisecond))

	b.ResetTimer()
	var pgTx, posted int64
	var pgTime, postTime, heraldCPU, genCPU, pgbenchCPU time.Duration
	var pgCPU, machine [2]cpuSpan // [0] the pgbench slices, [1] the load generator's
	var slices [2]benchresult.Series
	slices[0].Name, slices[1].Name = "pgbench tx/s", "herald POST/s"
	for i := 1; i <= rounds; i++ {
		fmt.Fprintf(os.Stderr, "[ingest] round %d/%d: pgbench, %d clients, %s\n", i, rounds, pgbench.Clients, slice)
		sessions, err := server.Children()
		heraldtest.Must(b, err)
		pgCPU[0].start(b, server.CPU)
		machine[0].start(b, benchproc.MachineCPU)
		pr := pgbench.Run(b, pgbenchBin, script, dbURL, slice)
		reaped(b, server, sessions)
		pgCPU[0].stop(b, server.CPU)
		machine[0].stop(b, benchproc.MachineCPU)
		pgTx, pgTime, pgbenchCPU = pgTx+pr.Tx, pgTime+pr.Took, pgbenchCPU+pr.CPU
		fmt.Fprintf(os.Stderr, "[ingest] round %d/%d: load generator closed loop, %d connections, %s\n", i, rounds, closedConns, slice)
		closed := o
		closed.duration, closed.concurrency = slice, closedConns
		cpu0, err := herald.CPU()
		heraldtest.Must(b, err)
		pgCPU[1].start(b, server.CPU)
		machine[1].start(b, benchproc.MachineCPU)
		res, err := run(closed)
		if err != nil {
			b.Fatalf("closed loop: %v", err)
		}
		pgCPU[1].stop(b, server.CPU)
		machine[1].stop(b, benchproc.MachineCPU)
		cpu1, err := herald.CPU()
		heraldtest.Must(b, err)
		heraldCPU, genCPU = heraldCPU+cpu1-cpu0, genCPU+res.cpu
		posted, postTime = posted+res.accepted, postTime+res.elapsed
		slices[0].X, slices[0].Y = append(slices[0].X, float64(i)), append(slices[0].Y, float64(pr.Tx)/pr.Took.Seconds())
		slices[1].X, slices[1].Y = append(slices[1].X, float64(i)), append(slices[1].Y, float64(res.accepted)/res.elapsed.Seconds())
	}
	tps := float64(pgTx) / pgTime.Seconds()
	posts := float64(posted) / postTime.Seconds()
	half := posts / 2

	fmt.Fprintf(os.Stderr, "[ingest] load generator open loop at %.0f/s, %s\n", half, phase)
	open := o
	open.duration, open.concurrency, open.rate = phase, openConns, half
	cpu0, err := herald.CPU()
	heraldtest.Must(b, err)
	res, err := run(open)
	if err != nil {
		b.Fatalf("open loop: %v", err)
	}
	cpu1, err := herald.CPU()
	heraldtest.Must(b, err)
	b.StopTimer()
	res.print(open)

	perPost := func(cpu time.Duration, n int64) float64 { return float64(cpu.Microseconds()) / float64(max(n, 1)) }
	r.Add(benchresult.Figure{Group: "closed loop", Name: "pgbench tx/s", Value: tps, Unit: "tx/s", Better: "higher"})
	r.Add(benchresult.Figure{Group: "closed loop", Name: "herald POST/s", Value: posts, Unit: "POST/s", Better: "higher"})
	r.Add(benchresult.Figure{Group: "closed loop", Name: "ratio POST/s ÷ pgbench tx/s", Value: posts / tps, Unit: "ratio", Better: "higher", Target: "≥ 0.6"})
	heraldPerPost, genPerPost := perPost(heraldCPU, posted), perPost(genCPU, posted)
	r.Add(benchresult.Figure{Group: "closed loop", Name: "herald CPU per POST", Value: heraldPerPost, Unit: "µs", Better: "lower"})
	r.Add(benchresult.Figure{Group: "closed loop", Name: "load generator CPU per POST", Value: genPerPost, Unit: "µs", Better: "lower"})
	// What bounds the ratio: on a machine both sides keep busy, each completes at the rate
	// its CPU per transaction allows, so the ratio of those costs is the ratio to expect.
	pgPerTx, pgPerPost := perPost(pgCPU[0].used, pgTx), perPost(pgCPU[1].used, posted)
	clientPerTx := perPost(pgbenchCPU, pgTx)
	perTx, perPOST := pgPerTx+clientPerTx, pgPerPost+heraldPerPost+genPerPost
	cores := float64(runtime.NumCPU())
	r.Add(benchresult.Figure{Group: "CPU breakdown", Name: "PostgreSQL CPU per pgbench tx", Value: pgPerTx, Unit: "µs", Better: "lower"})
	r.Add(benchresult.Figure{Group: "CPU breakdown", Name: "pgbench's own CPU per tx", Value: clientPerTx, Unit: "µs", Better: "lower"})
	r.Add(benchresult.Figure{Group: "CPU breakdown", Name: "PostgreSQL CPU per herald POST", Value: pgPerPost, Unit: "µs", Better: "lower"})
	r.Add(benchresult.Figure{Group: "CPU breakdown", Name: "machine busy in the pgbench slices", Value: machine[0].share(cores), Unit: "%"})
	r.Add(benchresult.Figure{Group: "CPU breakdown", Name: "machine busy in the herald slices", Value: machine[1].share(cores), Unit: "%"})
	r.Add(benchresult.Figure{Group: "CPU breakdown", Name: "CPU per pgbench tx ÷ CPU per POST (PostgreSQL + client)", Value: perTx / perPOST, Unit: "ratio"})
	openGroup := "open loop at half rate"
	r.Add(benchresult.Figure{Group: openGroup, Name: "rate", Value: float64(res.accepted) / res.elapsed.Seconds(), Unit: "POST/s"})
	r.Add(benchresult.Figure{Group: openGroup, Name: "refused (503, shed by the admission wait)", Value: float64(res.refused),
		Unit: "count", Better: "lower", Target: "= 0"})
	r.Latencies(openGroup, "due → answer", res.hist, "≤ 25")
	r.Add(benchresult.Figure{Group: openGroup, Name: "herald CPU per POST", Value: perPost(cpu1-cpu0, res.accepted), Unit: "µs", Better: "lower"})
	r.Add(benchresult.Figure{Group: openGroup, Name: "load generator CPU share", Value: res.cpu.Seconds() / res.elapsed.Seconds() * 100, Unit: "% of one core", Better: "lower"})
	r.Note("herald runs as a child process (herald serve --roles ingest, pool %d); the load generator is the benchmark's process, so its CPU figures are its own", heraldPool)
	r.Note("the ratio is the meaningful figure on a shared machine: pgbench and herald alternate in slices and see the same other load")
	r.Chart(benchresult.Chart{File: "latency", Title: fmt.Sprintf("POST latency open loop at %.0f/s (from when each request was due)", half),
		Kind: "cdf", XLabel: "latency (ms)", YLabel: "quantile", LogX: true, Series: []benchresult.Series{benchresult.CDF("herald POST", res.hist)}})
	r.Chart(benchresult.Chart{File: "slices", Title: "pgbench and herald in alternating slices (closed loop)", Kind: "line",
		XLabel: "slice", YLabel: "per second", Series: slices[:]})
	heraldtest.Must(b, r.Write())

	b.Logf("CPU per pgbench tx: PostgreSQL %.0f µs + pgbench %.0f µs; per POST: PostgreSQL %.0f µs + herald %.0f µs + load generator %.0f µs; "+
		"ratio of the two %.3f; machine busy %.0f %% (pgbench) and %.0f %% (herald)", pgPerTx, clientPerTx, pgPerPost,
		heraldPerPost, genPerPost, perTx/perPOST, machine[0].share(cores), machine[1].share(cores))
	b.ReportMetric(posts/tps, "ratio")
	b.ReportMetric(float64(res.hist.ValueAtQuantile(99))/1000, "p99-ms")
	b.Logf("pgbench %.0f tx/s, herald %.0f POST/s (ratio %.2f, target ≥ 0.6); open loop at %.0f/s: p50 %.2f ms, p99 %.2f ms (target ≤ 25 ms)",
		tps, posts, posts/tps, half, float64(res.hist.ValueAtQuantile(50))/1000, float64(res.hist.ValueAtQuantile(99))/1000)
}

// reaped waits, for at most a second, until the server's processes that began after the
// set before was read have ended: pgbench's sessions end after pgbench, and a session the
// postmaster reaps once the slice is over would add its whole CPU time to the next slice's.
func reaped(b *testing.B, server benchproc.Postgres, before map[int]bool) {
	for deadline := time.Now().Add(time.Second); ; {
		now, err := server.Children()
		heraldtest.Must(b, err)
		left := 0
		for pid := range now {
			if !before[pid] {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Logf("%d PostgreSQL processes that began in the pgbench slice still run (autovacuum?); their CPU counts where they end", left)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cpuSpan adds up the CPU time a counter (a process's, the machine's) moves in the spans
// between start and stop, and the wall time of those spans.
type cpuSpan struct {
	used, wall time.Duration
	at         time.Duration
	t0         time.Time
}

func (c *cpuSpan) start(b *testing.B, read func() (time.Duration, error)) {
	v, err := read()
	heraldtest.Must(b, err)
	c.at, c.t0 = v, time.Now()
}

func (c *cpuSpan) stop(b *testing.B, read func() (time.Duration, error)) {
	v, err := read()
	heraldtest.Must(b, err)
	c.used, c.wall = c.used+v-c.at, c.wall+time.Since(c.t0)
}

// share is the CPU used as a percentage of the wall time of cores.
func (c cpuSpan) share(cores float64) float64 {
	return c.used.Seconds() / (c.wall.Seconds() * cores) * 100
}
