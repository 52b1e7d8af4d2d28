// Command ingest load-tests herald's POST /api/notifications against a running herald and
// prints the accepted requests per second and the latency distribution.
//
//	go run ./bench/ingest --url http://127.0.0.1:8080 --key hk_... --duration 10s --concurrency 32
//	go run ./bench/ingest --rate 1900 ...   # open loop at a fixed rate (latency at a given load)
//
// Every request has its own Idempotency-Key and asks for two channels (SMS and EMAIL), so each
// accepted request writes one notification and two delivery rows. By default it also carries
// the addresses ("to"), so that any user id works; with --to=false the users 1..--users must
// have stored contacts (as the suite's ingest scenario, BenchmarkScenarioIngest, sets up, matching ingest/testdata/pgbench_accept.sql).
//
// Closed loop (--rate 0): --concurrency workers each send the next request when the last one
// is answered; the figure is the throughput. Open loop (--rate R): requests are due at a fixed
// rate and each latency is measured from the time it was due, so queueing in the generator
// counts (no coordinated omission); --concurrency bounds the requests in flight.
//
// The last line is machine-readable: "RESULT accepted=... failed=... post_s=... p50_ms=...
// p90_ms=... p99_ms=... p999_ms=... max_ms=... cpu_us=..." (cpu_us: the generator's own CPU
// time per accepted request).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/heraldhq/herald/internal/sleep"
)

type options struct {
	url         *url.URL
	key         string
	template    string
	users       int64
	to          bool
	priority    string
	duration    time.Duration
	warmup      time.Duration
	concurrency int
	rate        float64
}

func main() {
	rawURL := flag.String("url", "http://127.0.0.1:8080", "herald base URL")
	var o options
	flag.StringVar(&o.key, "key", os.Getenv("HERALD_API_KEY"), "API key (env HERALD_API_KEY)")
	flag.StringVar(&o.template, "template", "bench", "template name (created or replaced with SMS, EMAIL, PUSH and WEBHOOK)")
	createTemplate := flag.Bool("create-template", true, "create (or replace) the template before sending")
	flag.Int64Var(&o.users, "users", 1000000, "user ids 1..N are used in turn")
	flag.BoolVar(&o.to, "to", true, `send the addresses in "to"; false relies on the users' stored contacts`)
	flag.StringVar(&o.priority, "priority", "NORMAL", "priority of the notifications")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long to measure")
	flag.DurationVar(&o.warmup, "warmup", 0, "how long to send before measuring (connections, statement caches)")
	flag.IntVar(&o.concurrency, "concurrency", 32, "concurrent connections (requests in flight at most)")
	flag.Float64Var(&o.rate, "rate", 0, "requests per second (open loop); 0 sends as fast as the concurrency allows")
	flag.Parse()
	if o.key == "" {
		fail(errors.New("--key or HERALD_API_KEY is required"), 2)
	}
	u, err := url.Parse(*rawURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		fail(fmt.Errorf("--url %q: want http://host:port", *rawURL), 2)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	o.url = u
	if *createTemplate {
		if err := putTemplate(*rawURL, o.key, o.template); err != nil {
			fail(err, 1)
		}
	}
	if o.warmup > 0 {
		w := o
		w.duration = o.warmup
		_, _ = run(w)
	}
	r, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ingest: first error:", err)
	}
	r.print(o)
	if r.failed > 0 || r.accepted == 0 {
		os.Exit(1)
	}
}

func fail(err error, code int) {
	fmt.Fprintln(os.Stderr, "ingest:", err)
	os.Exit(code)
}

type result struct {
	accepted, failed int64
	refused          int64 // answered 503 (herald shedding load, with Retry-After): an answer, not a failure
	elapsed          time.Duration
	cpu              time.Duration // the generator's own CPU time (user + system)
	hist             *hdrhistogram.Histogram
}

// run sends for o.duration and returns what was answered. Requests still in flight when the
// time is up are completed and counted.
func run(o options) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	runID := fmt.Sprintf("%x", time.Now().UnixNano())
	var (
		seq, accepted, failed, refused atomic.Int64
		mu                             sync.Mutex
		firstErr                       error
		hist                           = hdrhistogram.New(1, int64(30*time.Second/time.Microsecond), 3)
	)
	tokens := make(chan time.Time, o.concurrency)
	if o.rate > 0 {
		go pace(ctx, o.rate, tokens)
	}
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for w := 0; w < o.concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(o.url.Host)
			defer c.close()
			local := hdrhistogram.New(1, int64(30*time.Second/time.Microsecond), 3)
			var req []byte
			for ctx.Err() == nil {
				due := time.Now()
				if o.rate > 0 {
					var ok bool
					if due, ok = <-tokens; !ok {
						break
					}
				}
				n := seq.Add(1)
				req = o.appendRequest(req[:0], runID, n)
				status, err := c.do(req)
				if err == nil && status == http.StatusServiceUnavailable {
					refused.Add(1)
					continue
				}
				if err == nil && status != http.StatusAccepted {
					err = fmt.Errorf("status %d", status)
				}
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				accepted.Add(1)
				_ = local.RecordValue(time.Since(due).Microseconds())
			}
			mu.Lock()
			hist.Merge(local)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return result{accepted: accepted.Load(), failed: failed.Load(), refused: refused.Load(), elapsed: time.Since(start),
		cpu: cpuTime() - cpu0, hist: hist}, firstErr
}

// pace sends the due time of each request at rate per second until ctx ends. The schedule is
// absolute: a late tick is sent at once, with its original due time.
func pace(ctx context.Context, rate float64, tokens chan<- time.Time) {
	defer close(tokens)
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for {
		select {
		case tokens <- next:
		case <-ctx.Done():
			return
		}
		next = next.Add(interval)
		if sleep.Until(ctx, next) != nil {
			return
		}
	}
}

func (r result) print(o options) {
	ms := func(q float64) float64 { return float64(r.hist.ValueAtQuantile(q)) / 1000 }
	perSec := float64(r.accepted) / r.elapsed.Seconds()
	mode := "closed loop"
	if o.rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f/s", o.rate)
	}
	fmt.Printf("ingest: %d accepted, %d refused (503), %d failed in %s: %.0f POST/s (%s, concurrency %d)\n",
		r.accepted, r.refused, r.failed, r.elapsed.Round(time.Millisecond), perSec, mode, o.concurrency)
	fmt.Printf("latency ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n",
		ms(50), ms(90), ms(99), ms(99.9), float64(r.hist.Max())/1000)
	cpuPerReq := 0.0
	if r.accepted > 0 {
		cpuPerReq = float64(r.cpu.Microseconds()) / float64(r.accepted)
	}
	fmt.Printf("generator CPU: %.0f us per request\n", cpuPerReq)
	fmt.Printf("RESULT accepted=%d failed=%d post_s=%.0f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f p999_ms=%.2f max_ms=%.2f cpu_us=%.0f\n",
		r.accepted, r.failed, perSec, ms(50), ms(90), ms(99), ms(99.9), float64(r.hist.Max())/1000, cpuPerReq)
}

// cpuTime returns the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
