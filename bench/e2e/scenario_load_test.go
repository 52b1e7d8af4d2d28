package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/result"
)

// The scenarios' load generators are open loop: request i is due at start + i/rate and is
// sent then, whatever the answers before it took; every latency counts from the due time,
// so a stall of the server shows in full (no coordinated omission).

// loadClient is the generators' HTTP client: keep-alive connections enough for a burst, and
// a timeout after which a request counts as refused ("timeout").
var loadClient = &http.Client{
	Timeout: 10 * time.Second,
	Transport: &http.Transport{
		MaxIdleConnsPerHost: 512,
		MaxConnsPerHost:     512,
		IdleConnTimeout:     30 * time.Second,
	},
}

// otpClient sends the HIGH notifications: an OTP comes from its own service (sign-in, auth),
// with connections of its own, not from the client that bursts marketing traffic; sharing
// loadClient's connections would measure the generator's queue, not herald's.
var otpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
}

// openLoop calls fire(i, due) at each due time start + i/rate until stop(due) says so, on
// at most loopWorkers goroutines (see openLoopPool, which blocks rather than skips), and
// waits for every call to return. It returns how many it fired.
func openLoop(ctx context.Context, start time.Time, rate float64, stop func(due time.Time) bool, fire func(i int, due time.Time)) int {
	return openLoopPool(ctx, start, rate, loopWorkers, stop, fire, nil)
}

// loopWorkers is openLoop's bound on calls in flight: far above what the low-rate loops
// (HIGH OTPs, the recovery load) ever have in flight.
const loopWorkers = 256

// openLoopPool is the open-loop generator with a bounded fan-out: workers goroutines take
// the requests in due order from a queue of as many entries. Request i is due at
// start + i/rate whatever the answers before it took, and every latency counts from its due
// time, so queueing behind a slow server shows in full (no coordinated omission). When a
// request falls due while every worker is busy and the queue is full, the generator cannot
// send it on time at all: with skip set, skip(i, due) counts it (apart from herald's
// answers: herald never saw it) and the loop goes on; with skip nil the loop waits for a
// place in the queue, falling behind schedule. It returns how many requests fell due.
func openLoopPool(ctx context.Context, start time.Time, rate float64, workers int, stop func(due time.Time) bool,
	fire func(i int, due time.Time), skip func(i int, due time.Time)) int {
	type request struct {
		i   int
		due time.Time
	}
	queue := make(chan request, workers)
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for r := range queue {
				fire(r.i, r.due)
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / rate)
	i := 0
	for ; ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if stop(due) {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // behind schedule: send at once; the latency still counts from due
		}
		r := request{i, due}
		if skip == nil {
			queue <- r
			continue
		}
		select {
		case queue <- r:
		default:
			skip(i, due)
		}
	}
	close(queue)
	wg.Wait()
	return i
}

// until returns a stop function for openLoop: stop at end.
func until(end time.Time) func(time.Time) bool {
	return func(due time.Time) bool { return !due.Before(end) }
}

// notificationBody is one SMS notification of template bench to an inline phone number.
func notificationBody(prio herald.Priority) string {
	return fmt.Sprintf(`{"userId":7,"template":"bench","priority":%q,"channels":["SMS"],`+
		`"payload":{"code":"123456"},"to":{"phone":"+15550000001"}}`, prio)
}

// postNotification sends one notification through the API with loadClient (otpClient for
// HIGH) and the given extra headers. It returns the delivery id on 202, or why it was refused: "http <status>",
// "timeout" or "error".
func (s *stack) postNotification(ctx context.Context, idem string, prio herald.Priority, header map[string]string) (id, refused string) {
	client := loadClient
	if prio == herald.PriorityHigh {
		client = otpClient
	}
	return s.postWith(ctx, client, idem, prio, header)
}

// postWith is postNotification through the given client.
func (s *stack) postWith(ctx context.Context, client *http.Client, idem string, prio herald.Priority, header map[string]string) (id, refused string) {
	base := s.url
	if prio == herald.PriorityHigh && s.highURL != "" {
		base = s.highURL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/notifications", strings.NewReader(notificationBody(prio)))
	if err != nil {
		return "", "error"
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return "", "timeout"
		}
		return "", "error"
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		_, _ = io.Copy(io.Discard, resp.Body)
		return "", fmt.Sprintf("http %d", resp.StatusCode)
	}
	var out struct {
		Deliveries []struct{ ID string } `json:"deliveries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Deliveries) != 1 {
		return "", "error"
	}
	return out.Deliveries[0].ID, ""
}

// quantilePerSecond keeps one latency histogram per second (by due time) and draws the
// quantile q of each as a series; seconds without a value are left out.
type quantilePerSecond struct {
	t0 time.Time
	h  []*hdrhistogram.Histogram
}

func (q *quantilePerSecond) record(due time.Time, d time.Duration) {
	i := int(due.Sub(q.t0) / time.Second)
	if i < 0 {
		return
	}
	for len(q.h) <= i {
		q.h = append(q.h, nil)
	}
	if q.h[i] == nil {
		q.h[i] = result.NewLatency()
	}
	_ = q.h[i].RecordValue(max(d.Microseconds(), 1))
}

func (q *quantilePerSecond) series(name string, quantile float64) result.Series {
	s := result.Series{Name: name}
	for i, h := range q.h {
		if h != nil && h.TotalCount() > 0 {
			s.X = append(s.X, float64(i))
			s.Y = append(s.Y, float64(h.ValueAtQuantile(quantile))/1000)
		}
	}
	return s
}

// record adds d (at least 1 µs) to h.
func record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(max(d.Microseconds(), 1))
}

// ms is a latency histogram's quantile in milliseconds.
func ms(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }

// addUsers writes n users with a phone and the tag bench, the audience of a campaign by
// segment, and analyses the table so that the expander's scan is planned for its size.
func (s *stack) addUsers(b testing.TB, n int) {
	b.Helper()
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `INSERT INTO user_contact (user_id, phone, tags)
		SELECT g, '+1555' || lpad(g::text, 7, '0'), '{bench}' FROM generate_series(1, $1::int) g`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE user_contact`); err != nil {
		b.Fatal(err)
	}
}

// startCampaign starts a campaign by segment (every user tagged bench) at prio through the
// API and returns its id.
func (s *stack) startCampaign(name string, prio herald.Priority) (string, error) {
	var created struct{ ID string }
	err := s.request(http.MethodPost, "/api/campaigns", "campaign-"+name, fmt.Sprintf(`{"name":%q,"template":"bench",`+
		`"channels":["SMS"],"priority":%q,"payload":{"code":"123456"},"audience":{"segment":{"tags":["bench"]}}}`, name, prio),
		http.StatusAccepted, &created)
	return created.ID, err
}

// campaignState reads a campaign's status and expanded count from its row (what GET answers,
// without GET's count of every delivery, which would load the database being measured).
func (s *stack) campaignState(ctx context.Context, id string) (status string, expanded int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT status, expanded FROM campaign WHERE id = $1`, id).Scan(&status, &expanded)
	return status, expanded, err
}
