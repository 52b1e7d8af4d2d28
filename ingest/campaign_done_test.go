package ingest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/campaign"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// campaignVersion is what a write to a campaign row changes: its status, updated_at and xmin
// (the id of the transaction that wrote the row version, new on every UPDATE).
type campaignVersion struct {
	status  string
	updated time.Time
	xmin    uint32
}

func (e *env) campaignState(id string) campaignVersion {
	e.t.Helper()
	var r campaignVersion
	require.NoError(e.t, e.pool.QueryRow(context.Background(),
		`SELECT status, updated_at, xmin::text::bigint FROM campaign WHERE id = $1`, id).Scan(&r.status, &r.updated, &r.xmin))
	return r
}

// postListCampaign posts a started campaign of SMS to the listed users and returns its id.
func (e *env) postListCampaign(key string, users ...int64) string {
	e.t.Helper()
	res := e.postCampaign(key, map[string]any{"name": key, "template": "promo", "channels": []string{"SMS"},
		"audience": map[string]any{"userIds": users}})
	require.Equal(e.t, http.StatusAccepted, res.status, "%s", res.body)
	return res.json(e.t)["id"].(string)
}

// A GET of a campaign writes nothing, not even for a campaign whose deliveries are all final
// (before, the GET ended it DONE).
func TestCampaignGetWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	// Users the directory does not hold: every channel is suppressed, so the campaign has no
	// delivery and is finished once expanded.
	id := e.postListCampaign("finished", 9_000_001, 9_000_002)
	e.runExpander(campaign.ExpanderConfig{DoneInterval: time.Hour}) // one look at start, before the lot
	heraldtest.WaitFor(t, time.Minute, "the campaign ACTIVE", func() bool { return e.campaignState(id).status == "ACTIVE" })

	before := e.campaignState(id)
	for range 3 {
		c := e.campaign(id)
		require.Equal(t, "ACTIVE", c["status"])
		require.Zero(t, c["deliveries"].(map[string]any)["PENDING"])
	}
	require.Equal(t, before, e.campaignState(id), "the GETs changed the campaign row")
}

// The expander ends an ACTIVE campaign DONE once its deliveries are all final, and leaves one
// with an open delivery ACTIVE.
func TestExpanderEndsFinishedCampaignsDone(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	e.directory(1) // user 1 has a phone number
	finished := e.postListCampaign("finished", 9_000_001)
	open := e.postListCampaign("open", 1)
	e.runExpander(campaign.ExpanderConfig{DoneInterval: 10 * time.Millisecond})

	e.waitCampaign(finished, "DONE", time.Minute)
	e.waitCampaign(open, "ACTIVE", time.Minute) // expanded (lots take turns: maybe after finished's end)
	active := e.campaignState(open)
	// Looked at again (updated_at moves with every look) and still ACTIVE: its SMS is PENDING.
	heraldtest.WaitFor(t, time.Minute, "another look at the open campaign", func() bool {
		return e.campaignState(open).updated.After(active.updated)
	})
	require.Equal(t, "ACTIVE", e.campaignState(open).status)

	var nid string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT id::text FROM notification WHERE campaign_id = $1`, open).Scan(&nid))
	n, err := delivery.Cancel(context.Background(), e.pool, []string{nid})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	e.waitCampaign(open, "DONE", time.Minute)
}
