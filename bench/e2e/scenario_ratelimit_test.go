package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// BenchmarkScenarioRateLimit is the suite's rate-limit scenario: with HIGH, NORMAL and LOW
// SMS backlogs all waiting, the provider calls per 1-second window against the configured
// limit, and how the calls divide between the priorities.
//
//	go test -run '^$' -bench ScenarioRateLimit -benchtime 1x -timeout 10m ./bench/e2e
func BenchmarkScenarioRateLimit(b *testing.B) {
	const limit = 200
	window := result.ScaledDuration(30*time.Second, 3*time.Second)
	// Each priority alone could keep the provider busy for the whole window.
	backlog := int(limit*window.Seconds()) + limit
	prios := []herald.Priority{herald.PriorityHigh, herald.PriorityNormal, herald.PriorityLow}
	r := result.New("rate-limit", "provider calls per 1 s window against the SMS limit, per priority")
	r.Load = fmt.Sprintf("SMS provider limit %d/s; backlogs of %d HIGH, %d NORMAL and %d LOW SMS deliveries inserted "+
		"together, then %s measured at the provider", limit, backlog, backlog, backlog, window)
	s := startStack(b, options{limit: limit, poolConns: 32, concurrency: map[herald.Priority]int{
		herald.PriorityHigh: 12, herald.PriorityNormal: 6, herald.PriorityLow: 8}})
	loadBefore := result.LoadAverage()

	b.ResetTimer()
	for _, p := range []herald.Priority{herald.PriorityLow, herald.PriorityNormal, herald.PriorityHigh} {
		s.insertBacklogAs(b, backlog, p)
	}
	// A second for every lane to be busy, then the window.
	from := time.Now().Add(time.Second)
	to := from.Add(window)
	ctx, cancel := context.WithCancel(context.Background())
	progress := result.Progress(ctx, os.Stderr, r.Scenario, 5*time.Second, func() string {
		return fmt.Sprintf("%d provider calls", len(s.sender.Calls()))
	})
	heraldtest.WaitFor(b, window+time.Minute, "the end of the measured window", func() bool { return time.Now().After(to) })
	progress()
	cancel()
	b.StopTimer()

	var inWindow []dispatch.Call
	per := map[herald.Priority]*result.PerSecond{}
	count := map[herald.Priority]int{}
	for _, p := range prios {
		per[p] = &result.PerSecond{T0: from}
	}
	total := &result.PerSecond{T0: from}
	for _, c := range s.sender.Calls() {
		if c.At.Before(from) || !c.At.Before(to) {
			continue
		}
		inWindow = append(inWindow, c)
		per[c.Message.Priority].Add(c.At, 1)
		total.Add(c.At, 1)
		count[c.Message.Priority]++
	}
	worst := maxInWindow(inWindow, time.Second)
	r.Add(result.Figure{Name: "max provider calls in a 1 s sliding window", Value: float64(worst), Unit: "calls",
		Better: "lower", Target: fmt.Sprintf("≤ %d", limit)})
	r.Add(result.Figure{Name: "provider calls", Value: float64(len(inWindow)) / window.Seconds(), Unit: "calls/s", Better: "higher"})
	secs := int(window / time.Second)
	c := result.Chart{File: "calls-per-second", Title: fmt.Sprintf("provider calls per second and priority, limit %d/s", limit),
		Kind: "line", XLabel: "seconds into the window", YLabel: "calls per second"}
	for _, p := range prios {
		share := 0.0
		if len(inWindow) > 0 {
			share = 100 * float64(count[p]) / float64(len(inWindow))
		}
		r.Add(result.Figure{Group: string(p), Name: "share of provider calls", Value: share, Unit: "%"})
		r.Add(result.Figure{Group: string(p), Name: "provider calls", Value: float64(count[p]) / window.Seconds(), Unit: "calls/s"})
		c.Series = append(c.Series, per[p].Series(string(p), secs))
		b.ReportMetric(share, string(p)+"-share-%")
	}
	c.Series = append(c.Series, total.Series("all", secs))
	limitLine := result.Series{Name: "limit"}
	for i := 0; i < secs; i++ {
		limitLine.X = append(limitLine.X, float64(i))
		limitLine.Y = append(limitLine.Y, limit)
	}
	c.Series = append(c.Series, limitLine)
	r.Chart(c)
	b.ReportMetric(float64(worst), "max-calls/1s-window")

	// Shares mean something only while every priority still had work waiting.
	var left []string
	rows, err := s.pool.Query(context.Background(), `SELECT priority, count(*) FROM delivery
		WHERE status IN ('PENDING', 'QUEUED') GROUP BY priority`)
	heraldtest.Must(b, err)
	waiting := map[string]int{}
	for rows.Next() {
		var p string
		var n int
		heraldtest.Must(b, rows.Scan(&p, &n))
		waiting[p] = n
	}
	heraldtest.Must(b, rows.Err())
	for _, p := range prios {
		left = append(left, fmt.Sprintf("%s %d", p, waiting[string(p)]))
	}
	sort.Strings(left)
	r.Note("Backlog still waiting at the end (PENDING or QUEUED): %v; a priority at 0 ran out of work and its share is "+
		"what it had, not what the limiter allowed it.", left)
	if worst > limit {
		r.Note("The limit was exceeded: %d calls in one 1 s window against a limit of %d.", worst, limit)
	}
	r.Note("Load average before %s, after %s.", loadBefore, result.LoadAverage())
	b.Logf("%s at limit %d/s: %d calls (%.0f/s), at most %d in any 1 s window; HIGH %d, NORMAL %d, LOW %d; waiting at the end: %v",
		window, limit, len(inWindow), float64(len(inWindow))/window.Seconds(), worst,
		count[herald.PriorityHigh], count[herald.PriorityNormal], count[herald.PriorityLow], left)
	heraldtest.Must(b, r.Write())
}
