// Command ingest load-tests herald's POST /api/notifications against a running herald and
// prints the accepted requests per second and the latency distribution.
//
//	go run ./bench/ingest --url http://127.0.0.1:8080 --key hk_... --duration 10s --concurrency 32
//	go run ./bench/ingest --rate 1900 ...   # open loop at a fixed rate (latency at a given load)
//
// Every request has its own Idempotency-Key and user id, and asks for two channels (SMS and
// EMAIL), so each accepted request writes one notification and two delivery rows.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "herald base URL")
	key := flag.String("key", os.Getenv("HERALD_API_KEY"), "API key (env HERALD_API_KEY)")
	template := flag.String("template", "bench", "template name (created if missing)")
	duration := flag.Duration("duration", 10*time.Second, "how long to send")
	concurrency := flag.Int("concurrency", 32, "concurrent requests")
	rate := flag.Float64("rate", 0, "requests per second (open loop); 0 sends as fast as the concurrency allows")
	priority := flag.String("priority", "NORMAL", "priority of the notifications")
	flag.Parse()
	if *key == "" {
		fmt.Fprintln(os.Stderr, "ingest: --key or HERALD_API_KEY is required")
		os.Exit(2)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2}, Timeout: 10 * time.Second}
	if err := putTemplate(client, *url, *key, *template); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	var seq, accepted, failed atomic.Int64
	var mu sync.Mutex
	hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)

	tokens := make(chan time.Time, *concurrency)
	if *rate > 0 {
		go func() {
			defer close(tokens)
			interval := time.Duration(float64(time.Second) / *rate)
			next := time.Now()
			for ctx.Err() == nil {
				select {
				case tokens <- next: // intended start time: latency includes queueing (no coordinated omission)
				case <-ctx.Done():
					return
				}
				next = next.Add(interval)
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
			}
		}()
	}

	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < *concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				if *rate > 0 {
					var ok bool
					if t0, ok = <-tokens; !ok {
						return
					}
				}
				n := seq.Add(1)
				body := fmt.Sprintf(`{"userId":%d,"template":%q,"priority":%q,"channels":["SMS","EMAIL"],`+
					`"payload":{"code":"%06d"},"to":{"phone":"+15550000000","email":"bench@example.com"}}`,
					n%1000000+1, *template, *priority, n%1000000)
				req, _ := http.NewRequest(http.MethodPost, *url+"/api/notifications", bytes.NewBufferString(body))
				req.Header.Set("Authorization", "Bearer "+*key)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%s-%d", run, n))
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					failed.Add(1)
					continue
				}
				accepted.Add(1)
				mu.Lock()
				_ = hist.RecordValue(time.Since(t0).Microseconds())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	ms := func(q float64) float64 { return float64(hist.ValueAtQuantile(q)) / 1000 }
	fmt.Printf("ingest: %d accepted, %d failed in %s: %.0f POST/s (concurrency %d, rate %s)\n",
		accepted.Load(), failed.Load(), elapsed.Round(time.Millisecond),
		float64(accepted.Load())/elapsed.Seconds(), *concurrency, rateLabel(*rate))
	fmt.Printf("latency ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n",
		ms(50), ms(90), ms(99), ms(99.9), float64(hist.Max())/1000)
	if failed.Load() > 0 {
		os.Exit(1)
	}
}

func rateLabel(r float64) string {
	if r == 0 {
		return "closed loop"
	}
	return fmt.Sprintf("%.0f/s", r)
}

func putTemplate(c *http.Client, url, key, name string) error {
	body := `{"category":"bench","channels":["SMS","EMAIL","PUSH","WEBHOOK"],"content":{}}`
	req, _ := http.NewRequest(http.MethodPut, url+"/api/templates/"+name, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("put template %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("put template %s: %s: %s", name, resp.Status, b)
	}
	return nil
}
