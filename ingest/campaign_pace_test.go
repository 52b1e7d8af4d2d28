package ingest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/campaign"
)

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
	e.runExpander(campaign.ExpanderConfig{LotSize: 100, Rate: 1000})
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
