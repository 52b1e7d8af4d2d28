package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/heraldhq/herald/internal/heraldtest"
)

var loadClient = &http.Client{Timeout: 10 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128}}

// openLoop calls fire(i, due) in its own goroutine at each due time start + i/rate until
// stop is closed; the latency of a call counts from due, not from when it could be sent.
// It waits for every call and returns how many it made.
func openLoop(ctx context.Context, start time.Time, rate float64, stop <-chan struct{}, fire func(i int, due time.Time)) int {
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	i := 0
	for ; ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		select {
		case <-stop:
			wg.Wait()
			return i
		case <-time.After(time.Until(due)):
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fire(i, due)
		}()
	}
	wg.Wait()
	return i
}

// post sends one NORMAL SMS notification and returns its delivery id.
func post(ctx context.Context, base, key, idem string) (string, error) {
	body := `{"userId":1,"template":"bench","priority":"NORMAL","channels":["SMS"],` +
		`"payload":{"code":"123456"},"to":{"phone":"+15550100000"}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/notifications", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	resp, err := loadClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		_, _ = io.Copy(io.Discard, resp.Body)
		return "", fmt.Errorf("post: %s", resp.Status)
	}
	var out struct {
		Deliveries []struct{ ID string } `json:"deliveries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Deliveries) != 1 {
		return "", fmt.Errorf("post: decode answer: %w", err)
	}
	return out.Deliveries[0].ID, nil
}

// assignments is each member of group and the partitions of topic it holds.
func assignments(b *testing.B, adm *kadm.Client, group, topic string) map[string][]int32 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	groups, err := adm.DescribeGroups(ctx, group)
	heraldtest.Must(b, err)
	out := map[string][]int32{}
	for _, m := range groups[group].Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, t := range a.Topics {
			if t.Topic == topic {
				out[m.MemberID] = append(out[m.MemberID], t.Partitions...)
			}
		}
	}
	return out
}

// waitMembers waits until group is stable with n members holding every partition of topic.
func waitMembers(b *testing.B, adm *kadm.Client, group, topic string, n int) {
	b.Helper()
	heraldtest.WaitFor(b, 2*time.Minute, fmt.Sprintf("%d members in %s", n, group), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		groups, err := adm.DescribeGroups(ctx, group)
		if err != nil || groups[group].State != "Stable" || len(groups[group].Members) != n {
			return false
		}
		held := 0
		for _, parts := range assignments(b, adm, group, topic) {
			held += len(parts)
		}
		return held == 4
	})
}

// poll checks cond every 200 ms until it holds or d has passed.
func poll(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// pause lets the load run for d: a phase of the scenario, not a wait for a condition.
func pause(d time.Duration) { time.Sleep(d) }
