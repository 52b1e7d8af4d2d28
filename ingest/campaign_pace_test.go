package ingest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPacerSpacesLotsToTheRate(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var p pacer
	// 1,000 deliveries at 5,000/s take 200 ms of budget: a lot that took 60 ms waits 140 ms.
	require.Equal(t, 140*time.Millisecond, p.wait(ms(0), ms(60), 1000, 5000))
	// The next lot started on time and took 250 ms: it is late, no wait.
	require.Equal(t, time.Duration(0), p.wait(ms(200), ms(450), 1000, 5000))
	// Being late gives no credit beyond the lot: the one after starts when its budget ends.
	require.Equal(t, 150*time.Millisecond, p.wait(ms(450), ms(500), 1000, 5000))
	// After an idle hour, the first lot is paced from its own start.
	require.Equal(t, 190*time.Millisecond, p.wait(t0.Add(time.Hour), t0.Add(time.Hour+10*time.Millisecond), 1000, 5000))
	// Unpaced, and a lot that wrote nothing (all suppressed), never wait.
	require.Equal(t, time.Duration(0), p.wait(ms(0), ms(1), 1000, -1))
	require.Equal(t, time.Duration(0), p.wait(t0.Add(2*time.Hour), t0.Add(2*time.Hour), 0, 5000))
}

// The expander's loop honours its rate: 500 deliveries in lots of 100 at 1,000/s cannot be
// written in less than the four pauses between the five lots (0.4 s). The bound is a floor,
// so a slow machine cannot make it fail; without pacing the lots take a few milliseconds.
func TestExpanderIsPaced(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	e.directory(1000)
	list := make([]int64, 500)
	for i := range list {
		list[i] = int64(i + 1) // users without a phone or opted out are suppressed: count what was written
	}
	res := e.postCampaign("k", map[string]any{"name": "n", "template": "promo", "channels": []string{"SMS"}, "audience": map[string]any{"userIds": list}})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	id := res.json(t)["id"].(string)
	start := time.Now()
	e.runExpander(ExpanderConfig{LotSize: 100, Rate: 1000})
	c := e.waitCampaign(id, "ACTIVE", time.Minute)
	took := time.Since(start)
	var written int64
	for _, n := range c["deliveries"].(map[string]any) {
		written += int64(n.(float64))
	}
	require.Positive(t, written)
	floor := time.Duration(written-written/5) * time.Second / 1000 // every lot but the last is followed by its pause
	require.GreaterOrEqual(t, took, floor, "%d deliveries at 1,000/s", written)
}
