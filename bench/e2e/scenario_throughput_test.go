package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/internal/pgbench"
	"github.com/heraldhq/herald/bench/internal/riverbench"
	"github.com/heraldhq/herald/bench/internal/settle"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// BenchmarkScenarioThroughput is the suite's throughput scenario: how many deliveries per
// second herald completes end to end (relay, Kafka, claim, provider call, outcome) with no
// rate limit and a provider that answers at once. A NORMAL backlog of 100,000 (× BENCH_SCALE)
// is inserted in transactions of 10,000 while herald runs; the figure counts from the first
// insert to the last delivery SENT. Charts: provider calls per 1 s and the backlog (inserted,
// not yet sent to the provider) over time.
func BenchmarkScenarioThroughput(b *testing.B) {
	backlog := result.Scaled(100_000, 500)
	const batch = 10_000
	river := riverbench.Build(b) // compiled before anything is measured
	s := startStack(b, options{poolConns: 80, concurrency: map[herald.Priority]int{
		herald.PriorityHigh: 4, herald.PriorityNormal: liftedConcurrency, herald.PriorityLow: 4}})
	called := s.countCalls()
	r := result.New("throughput", "end to end with limits lifted: deliveries per second")
	r.Load = fmt.Sprintf("a backlog of %d NORMAL SMS deliveries inserted in transactions of %d while herald runs; "+
		"no rate limit, a provider that answers at once, NORMAL lane concurrency %d", backlog, batch, liftedConcurrency)

	var clientID string
	heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT id FROM api_client LIMIT 1`).Scan(&clientID))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var inserted atomic.Int64
	stop := result.Progress(ctx, os.Stderr, "throughput", 5*time.Second, func() string {
		return fmt.Sprintf("%d of %d inserted, %d sent to the provider", inserted.Load(), backlog, called.Load())
	})
	defer stop()

	b.ResetTimer()
	dbBefore, scansBefore := s.dbStats(b), s.relationScans(b)
	start := time.Now()
	var insertedAt []time.Time // when each batch committed
	var insertedN []int
	for from := 0; from < backlog; from += batch {
		n := min(batch, backlog-from)
		deliverytest.Backlog(b, s.pool, n, deliverytest.Spec{ClientID: clientID, UserID: 1, Template: "bench",
			Category: "bench", Recipient: `{"phone":"+15550000000"}`, Channel: herald.ChannelSMS, Priority: herald.PriorityNormal})
		inserted.Add(int64(n))
		insertedAt, insertedN = append(insertedAt, time.Now()), append(insertedN, n)
	}
	s.waitAllSent(b, called, backlog)
	b.StopTimer()
	stop()
	s.logDBStats(b, dbBefore, backlog)
	b.Logf("rows returned by scans per delivery, by relation: %s", topScans(scansBefore, s.relationScans(b), backlog, 6))

	var first, last time.Time
	heraldtest.Must(b, s.pool.QueryRow(context.Background(), `SELECT min(created_at), max(sent_at) FROM delivery`).Scan(&first, &last))
	calls := s.sender.Calls()
	e2e := float64(backlog) / last.Sub(first).Seconds()
	span := calls[len(calls)-1].At.Sub(calls[0].At)
	drain := float64(len(calls)) / math.Max(span.Seconds(), 1e-3)
	r.Add(result.Figure{Name: "deliveries/s", Value: e2e, Unit: "deliveries/s", Better: "higher"})
	// herald stops before the references run: its relay's walsender would otherwise decode
	// pgbench's WAL and River's beside them, and its consumers and sweeper keep polling.
	s.stop()
	tps := acceptReference(b)
	r.Add(result.Figure{Name: "pgbench of the accept SQL", Value: tps, Unit: "tx/s", Better: "higher"})
	r.Add(result.Figure{Name: "ratio deliveries/s ÷ pgbench tx/s", Value: e2e / tps, Unit: "ratio", Better: "higher", Target: "≥ 1.0"})
	riverDrain := riverNoopDrain(b, river, backlog)
	r.Add(result.Figure{Name: "River no-op drain of as many jobs", Value: riverDrain, Unit: "jobs/s", Better: "higher"})
	r.Add(result.Figure{Name: "ratio deliveries/s ÷ River drain", Value: e2e / riverDrain, Unit: "ratio", Better: "higher"})
	r.Add(result.Figure{Name: "provider calls/s (first → last call)", Value: drain, Unit: "calls/s", Better: "higher"})
	r.Add(result.Figure{Name: "first insert → last SENT", Value: last.Sub(first).Seconds(), Unit: "s", Better: "lower"})
	r.Add(result.Figure{Name: "insert of the backlog", Value: insertedAt[len(insertedAt)-1].Sub(start).Seconds(), Unit: "s"})
	r.Add(result.Figure{Name: "provider calls", Value: float64(len(calls)), Unit: "count"})
	r.Add(result.Figure{Name: "duplicate provider calls", Value: float64(len(calls) - backlog), Unit: "count", Better: "lower"})
	if backlog < 100_000 {
		r.Note("BENCH_SCALE=%g: %d deliveries; the first and last seconds (Kafka consumers joining, the tail) weigh more in a small run, so deliveries/s is lower than at full scale", result.Scale(), backlog)
	}
	r.Note("herald (API, relay, dispatch) runs in the benchmark's process; PostgreSQL, Kafka and Redis share the machine's cores with it")
	r.Note("the reference, pgbench of the accept SQL (ingest/testdata/pgbench_accept.sql, %d clients, one notification and two deliveries a transaction), "+
		"runs after herald's drain, with herald stopped, on a scratch database of the same cluster, once a CHECKPOINT is done and no autovacuum worker runs (at most a minute): "+
		"as quiet as the cluster was when herald's run began; the ratio is the figure to compare between machines", pgbench.Clients)
	r.Note("the second reference, River (bench/river) draining a backlog of as many no-op jobs inserted before its workers start, " +
		"runs after pgbench on a scratch database of its own, the cluster settled the same way: what a PostgreSQL job queue does on this machine with no provider call, no Kafka and no relay")

	rate, left := throughputSeries(start, calls, insertedAt, insertedN)
	r.Chart(result.Chart{File: "rate", Title: "provider calls per second", Kind: "line",
		XLabel: "seconds since the first insert", YLabel: "deliveries/s", Series: []result.Series{rate}})
	r.Chart(result.Chart{File: "backlog", Title: "backlog: inserted, not yet sent to the provider", Kind: "line",
		XLabel: "seconds since the first insert", YLabel: "deliveries", Series: []result.Series{left}})
	heraldtest.Must(b, r.Write())

	b.ReportMetric(e2e, "deliveries/s")
	b.ReportMetric(drain, "calls/s")
	b.Logf("%d NORMAL deliveries, no rate limit, zero-latency provider: %.0f deliveries/s from the first insert to the last SENT (%s); "+
		"%d provider calls over %s (%.0f/s); pgbench of the accept SQL %.0f tx/s, ratio %.2f; River's no-op drain %.0f jobs/s, ratio %.2f",
		backlog, e2e, last.Sub(first).Round(time.Millisecond), len(calls), span.Round(time.Millisecond), drain, tps, e2e/tps, riverDrain, e2e/riverDrain)
}

// riverNoopDrain runs River's drain of n no-op jobs (bench/river with an empty -rates), and returns its
// jobs worked per second.
func riverNoopDrain(b *testing.B, bin string, n int) float64 {
	b.Helper()
	waited := settle.Cluster(b, os.Getenv(stacktest.EnvPostgres), time.Minute)
	fmt.Fprintf(os.Stderr, "[throughput] River draining %d no-op jobs (after %s for the cluster to settle)\n", n, waited.Round(100*time.Millisecond))
	res := riverbench.Run(b, bin, "-rates", "", "-backlog", strconv.Itoa(n))
	for _, f := range res.Figures {
		if f.Group == "River" && f.Name == "drain" {
			return f.Value
		}
	}
	b.Fatalf("bench/river wrote no drain figure: %+v", res.Figures)
	return 0
}

// acceptReference runs pgbench of the accept SQL on a scratch database of the same cluster
// for 10 s (× BENCH_SCALE, at least 2 s) and returns its transactions per second.
func acceptReference(b *testing.B) float64 {
	b.Helper()
	d := max(time.Duration(float64(10*time.Second)*result.Scale()), 2*time.Second).Round(time.Second)
	url := stacktest.PostgresURL(b)
	pgbench.Prepare(b, url)
	waited := settle.Cluster(b, os.Getenv(stacktest.EnvPostgres), time.Minute)
	fmt.Fprintf(os.Stderr, "[throughput] pgbench of the accept SQL, %d clients, %s (after %s for the cluster to settle)\n",
		pgbench.Clients, d, waited.Round(100*time.Millisecond))
	r := pgbench.Run(b, pgbench.Find(b), pgbench.AcceptScript(b), url, d)
	return float64(r.Tx) / r.Took.Seconds()
}

// throughputSeries buckets the provider calls into 1 s windows since start (calls per
// second) and the backlog at the end of each second: deliveries committed by then minus
// calls made by then.
func throughputSeries(start time.Time, calls []dispatch.Call, insertedAt []time.Time, insertedN []int) (rate, left result.Series) {
	rate, left = result.Series{Name: "deliveries/s"}, result.Series{Name: "backlog"}
	if len(calls) == 0 {
		return rate, left
	}
	end := calls[0].At
	for _, c := range calls {
		if c.At.After(end) {
			end = c.At
		}
	}
	buckets := make([]float64, int(end.Sub(start)/time.Second)+1)
	for _, c := range calls {
		if i := int(c.At.Sub(start) / time.Second); i >= 0 && i < len(buckets) {
			buckets[i]++
		}
	}
	var done, ins float64
	j := 0
	for i, n := range buckets {
		edge := start.Add(time.Duration(i+1) * time.Second)
		for j < len(insertedAt) && insertedAt[j].Before(edge) {
			ins += float64(insertedN[j])
			j++
		}
		done += n
		rate.X, rate.Y = append(rate.X, float64(i)+0.5), append(rate.Y, n)
		left.X, left.Y = append(left.X, float64(i+1)), append(left.Y, math.Max(ins-done, 0))
	}
	return rate, left
}
