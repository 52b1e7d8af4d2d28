// Package memory holds the suite's memory scenario: herald's resident memory while it
// carries a large backlog, measured on a `herald serve` child process (see docs/benchmarks.md).
//
//	eval "$(deploy/local/stack.sh env)"
//	go test -run '^$' -bench ScenarioMemory -benchtime 1x -timeout 20m ./bench/memory
package memory

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/internal/benchproc"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// BenchmarkScenarioMemory starts `herald serve --roles relay,dispatch` (log senders, SMS
// limited to 500 calls/s) on a scratch database, then writes a backlog of 1,000,000 LOW SMS
// deliveries (× BENCH_SCALE) in transactions of 10,000 as a campaign would, and samples the
// child's VmRSS every second until the relay has published the whole backlog and a hold
// (30 s × BENCH_SCALE, at least 3 s) has passed. Figures: peak RSS (target ≤ 150 MB) and
// VmHWM; chart: RSS over time.
func BenchmarkScenarioMemory(b *testing.B) {
	rows := result.Scaled(1_000_000, 1_000)
	const limit, batch = 500, 10_000
	hold := time.Duration(max(float64(30*time.Second)*result.Scale(), float64(3*time.Second)))
	r := result.New("memory", "herald's resident memory carrying a large backlog")
	r.Load = fmt.Sprintf("herald serve --roles relay,dispatch as a child process; a backlog of %d LOW SMS deliveries "+
		"written in transactions of %d while it runs; provider limit %d calls/s; held %s after the relay published it all",
		rows, batch, limit, hold)

	url := stacktest.PostgresURL(b)
	topics := stacktest.KafkaTopics(b, map[string]int32{"high": 2, "normal": 2, "low": 2})
	_, prefix := stacktest.Redis(b)
	bin := benchproc.BuildHerald(b)
	pool, err := pgxpool.New(context.Background(), url)
	heraldtest.Must(b, err)
	b.Cleanup(pool.Close)
	slot := stacktest.Name("bench_mem")
	args := []string{"serve", "--roles", "relay,dispatch", "--database-url", url, "--http-addr", "127.0.0.1:0", "--admin-addr", "",
		"--kafka-brokers", strings.Join(stacktest.KafkaBrokers(b), ","), "--redis-addr", os.Getenv(stacktest.EnvRedis),
		"--redis-prefix", prefix, "--relay-slot", slot, "--relay-publication", slot,
		"--rate-limits", fmt.Sprintf("log:SMS=%d", limit), "--log-level", "warn"}
	for _, p := range []string{"high", "normal", "low"} {
		args = append(args, "--topic-"+p, topics[p], "--dispatch-group-"+p, slot+"_"+p)
	}
	proc := benchproc.Start(b, bin, args...)
	ctx := context.Background()
	// Rows committed before the relay streams reach Kafka through its sweeper only, after a
	// grace period: the backlog starts once the slot streams.
	proc.WaitFor(b, 2*time.Minute, 200*time.Millisecond, "the relay streaming", func() bool {
		var streaming bool
		heraldtest.Must(b, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1 AND r.state = 'streaming')`, slot).Scan(&streaming))
		return streaming
	})

	// RSS every second from here on, in a goroutine so that the inserts do not delay it.
	start := time.Now()
	var mu sync.Mutex
	var rss result.Series
	rss.Name = "VmRSS"
	var peakKB, inserted int64
	sample := func() {
		kb, err := proc.StatusKB("VmRSS")
		if err != nil {
			return // herald exited: WaitFor reports it
		}
		mu.Lock()
		defer mu.Unlock()
		rss.X, rss.Y = append(rss.X, time.Since(start).Seconds()), append(rss.Y, float64(kb)/1024)
		peakKB = max(peakKB, kb)
	}
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			sample()
			select {
			case <-sampling.Done():
				return
			case <-t.C:
			}
		}
	}()
	stopProgress := result.Progress(ctx, os.Stderr, "memory", 5*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d of %d inserted, RSS peak %d MB", inserted, rows, peakKB/1024)
	})
	defer stopProgress()

	b.ResetTimer()
	var clientID string
	heraldtest.Must(b, pool.QueryRow(ctx, `INSERT INTO api_client (id, name, key_prefix, key_hash) VALUES (gen_random_uuid(), 'bench', 'hk_bench', '\x00') RETURNING id`).Scan(&clientID))
	_, err = pool.Exec(ctx, `INSERT INTO template (name, category, channels) VALUES ('promo', 'marketing', '{SMS}')`)
	heraldtest.Must(b, err)
	for from := 0; from < rows; from += batch {
		n := min(batch, rows-from)
		deliverytest.Backlog(b, pool, n, deliverytest.Spec{ClientID: clientID, UserID: 1, Template: "promo", Category: "marketing",
			Recipient: `{"phone":"+15550000000"}`, Channel: herald.ChannelSMS, Priority: herald.PriorityLow})
		mu.Lock()
		inserted += int64(n)
		mu.Unlock()
	}
	insertedIn := time.Since(start)
	// Published: no row left in the version the backlog wrote (the relay marks each QUEUED).
	proc.WaitFor(b, 15*time.Minute, time.Second, "the backlog published", func() bool {
		var left int
		heraldtest.Must(b, pool.QueryRow(ctx, `SELECT count(*) FROM delivery WHERE status = 'PENDING' AND attempts = 0 AND next_attempt_at = created_at`).Scan(&left))
		return left == 0
	})
	publishedIn := time.Since(start)
	holdUntil := time.Now().Add(hold)
	proc.WaitFor(b, hold+time.Minute, 200*time.Millisecond, "the hold", func() bool { return !time.Now().Before(holdUntil) })
	b.StopTimer()
	stopSampling()
	<-sampled
	stopProgress()

	hwm, err := proc.StatusKB("VmHWM")
	heraldtest.Must(b, err)
	cpu, err := proc.CPU()
	heraldtest.Must(b, err)
	var sent int
	heraldtest.Must(b, pool.QueryRow(ctx, `SELECT count(*) FROM delivery WHERE status = 'SENT'`).Scan(&sent))
	last := rss.Y[len(rss.Y)-1]
	elapsed := time.Since(start)
	r.Add(result.Figure{Name: "peak RSS", Value: float64(peakKB) / 1024, Unit: "MB", Better: "lower", Target: "≤ 150"})
	r.Add(result.Figure{Name: "VmHWM", Value: float64(hwm) / 1024, Unit: "MB", Better: "lower"})
	r.Add(result.Figure{Name: "last RSS", Value: last, Unit: "MB", Better: "lower"})
	r.Add(result.Figure{Name: "backlog inserted in", Value: insertedIn.Seconds(), Unit: "s"})
	r.Add(result.Figure{Name: "backlog published after", Value: publishedIn.Seconds(), Unit: "s", Better: "lower"})
	r.Add(result.Figure{Name: "sent meanwhile", Value: float64(sent), Unit: "count"})
	r.Add(result.Figure{Name: "herald CPU", Value: cpu.Seconds(), Unit: "s", Better: "lower"})
	r.Add(result.Figure{Name: "herald CPU share", Value: cpu.Seconds() / elapsed.Seconds() * 100, Unit: "% of one core"})
	r.Note("RSS is sampled once a second from /proc/<pid>/status; VmHWM is the kernel's own peak, which catches what falls between samples")
	r.Note("the backlog drains at the provider limit (%d/s): at the end most of it is still in Kafka, which is the point — herald must not hold it in memory", limit)
	r.Chart(result.Chart{File: "rss", Title: fmt.Sprintf("herald RSS with a backlog of %d LOW deliveries", rows), Kind: "line",
		XLabel: "seconds since the first insert", YLabel: "MB", Series: []result.Series{rss}})
	heraldtest.Must(b, r.Write())

	b.ReportMetric(float64(peakKB)/1024, "peak-RSS-MB")
	b.ReportMetric(float64(hwm)/1024, "VmHWM-MB")
	b.Logf("herald memory with a backlog of %d LOW deliveries (relay + dispatch, limit %d/s): inserted in %s, published after %s; "+
		"RSS peak %d MB (VmHWM %d MB), last %.0f MB; %d sent meanwhile; herald CPU %s",
		rows, limit, insertedIn.Round(time.Millisecond), publishedIn.Round(time.Millisecond), peakKB/1024, hwm/1024, last, sent, cpu)
}
