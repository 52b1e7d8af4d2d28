package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
)

const promoTemplate = `{"category": "marketing", "channels": ["EMAIL", "SMS"], "content": {
  "EMAIL": {"default": {"subject": "Sale", "text": "{{.discount}}% off"}},
  "SMS":   {"default": {"text": "{{.discount}}% off"}}}}`

// campaignState is the part of GET /api/campaigns/{id} the tests read.
type campaignState struct {
	Status     string           `json:"status"`
	Audience   int              `json:"audience"`
	Expanded   int              `json:"expanded"`
	Deliveries map[string]int   `json:"deliveries"`
	Suppressed map[string]int64 `json:"suppressed"`
}

func getCampaign(t *testing.T, addr, key, id string) campaignState {
	t.Helper()
	var c campaignState
	doJSON(t, http.MethodGet, "http://"+addr+"/api/campaigns/"+id, key, "", &c, http.StatusOK)
	return c
}

// createCampaign posts a campaign over the tagged segment and returns its id.
func createCampaign(t *testing.T, addr, key, body string) string {
	t.Helper()
	status, b, err := tryJSON(context.Background(), http.MethodPost, "http://"+addr+"/api/campaigns", key, "campaign-1", body)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status, "%s", b)
	var ans struct{ ID string }
	require.NoError(t, json.Unmarshal(b, &ans))
	return ans.ID
}

// directory writes users 1..n with an e-mail address and a phone number, tagged "promo", by
// SQL: through the API it would take minutes.
func directory(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO user_contact (user_id, email, phone, tags)
SELECT g, 'u' || g || '@example.com', '+1555' || lpad(g::text, 7, '0'), ARRAY['promo']
FROM generate_series(1, $1::int) AS g`, n)
	require.NoError(t, err)
}

// TestCampaignExpanderKilled kills an ingest process (kill -9) in the middle of a campaign's
// expansion and starts another: the new expander resumes at the cursor and rewrites the lot
// that was in progress, and every user ends with exactly one delivery per channel.
func TestCampaignExpanderKilled(t *testing.T) {
	st := newStack(t)
	key := st.apiKey(t)
	addr := heraldtest.FreeAddr(t)
	noSim := &simulator{}
	first := st.serve(t, "ingest-1", addr, noSim, "--roles", "ingest")
	pool, err := pgxpool.New(context.Background(), st.dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	doJSON(t, http.MethodPut, "http://"+addr+"/api/templates/promo", key, promoTemplate, nil, http.StatusOK, http.StatusCreated)
	const users = 60_000
	directory(t, pool, users)

	id := createCampaign(t, addr, key, `{"name": "sale", "template": "promo", "channels": ["SMS", "EMAIL"],
		"payload": {"discount": 20}, "audience": {"segment": {"tags": ["promo"]}}}`)
	heraldtest.WaitFor(t, 60*time.Second, "the expansion to be under way", func() bool {
		return getCampaign(t, addr, key, id).Expanded >= 3000
	})
	first.kill()
	var expanded int
	var status string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT expanded, status FROM campaign WHERE id = $1`, id).Scan(&expanded, &status))
	require.Equal(t, "EXPANDING", status, "killed after the expansion ended: the test proves nothing")
	t.Logf("killed with %d of %d users expanded", expanded, users)

	st.serve(t, "ingest-2", addr, noSim, "--roles", "ingest")
	heraldtest.WaitFor(t, 3*time.Minute, "the campaign to be expanded", func() bool {
		return getCampaign(t, addr, key, id).Status == "ACTIVE"
	})
	c := getCampaign(t, addr, key, id)
	require.Equal(t, users, c.Audience)
	require.Equal(t, users, c.Expanded)
	var pairs, distinct, missing int
	require.NoError(t, pool.QueryRow(context.Background(), `
SELECT count(*), count(DISTINCT (n.user_id, d.channel)),
       (SELECT count(*) FROM generate_series(1, $2::int) AS g WHERE NOT EXISTS (
            SELECT 1 FROM notification m WHERE m.campaign_id = $1 AND m.user_id = g))
FROM notification n JOIN delivery d ON d.notification_id = n.id WHERE n.campaign_id = $1`, id, users).
		Scan(&pairs, &distinct, &missing))
	require.Equal(t, 2*users, pairs, "one delivery per user and channel")
	require.Equal(t, pairs, distinct, "no user has two deliveries on a channel")
	require.Zero(t, missing, "no user skipped")
}

// TestCampaignCancelDuringDrain cancels a campaign while dispatch drains it through the
// real pipeline to the provider simulator: once the cancel has returned, no provider call
// starts for the campaign. Every call the simulator saw is for a delivery that a worker held
// (SENDING) or had finished when the cancel returned; the calls in flight then finish and
// are recorded.
func TestCampaignCancelDuringDrain(t *testing.T) {
	e := newE2E(t, 0, "--sim-latency", "all.median=20ms,all.p99=60ms,all.min=5ms")
	e.put(t, "/api/templates/promo", promoTemplate)
	const users = 3000
	directory(t, e.pool, users)
	id := createCampaign(t, e.addr, e.key, `{"name": "sale", "template": "promo", "channels": ["SMS"],
		"payload": {"discount": 20}, "audience": {"segment": {"tags": ["promo"]}}}`)
	heraldtest.WaitFor(t, 60*time.Second, "the drain to be under way", func() bool {
		return getCampaign(t, e.addr, e.key, id).Deliveries["SENT"] >= 100
	})
	doJSON(t, http.MethodPost, "http://"+e.addr+"/api/campaigns/"+id+"/cancel", e.key, "", nil, http.StatusOK)

	// What a worker held or had finished when the cancel returned.
	held := map[string]bool{}
	rows, err := e.pool.Query(context.Background(), `SELECT d.id::text FROM delivery d JOIN notification n ON n.id = d.notification_id
WHERE n.campaign_id = $1 AND d.status IN ('SENDING', 'SENT', 'FAILED', 'EXPIRED')`, id)
	require.NoError(t, err)
	for rows.Next() {
		var d string
		require.NoError(t, rows.Scan(&d))
		held[d] = true
	}
	require.NoError(t, rows.Err())
	rows.Close()

	// The calls in flight finish and are recorded; nothing is left to send.
	var c campaignState
	heraldtest.WaitFor(t, 60*time.Second, "the calls in flight to finish", func() bool {
		c = getCampaign(t, e.addr, e.key, id)
		return c.Deliveries["SENDING"] == 0 && c.Deliveries["PENDING"] == 0 && c.Deliveries["QUEUED"] == 0
	})
	require.Equal(t, "CANCELLED", c.Status)
	require.Positive(t, c.Deliveries["CANCELLED"], "the cancel came before the end of the drain")
	require.Equal(t, users, c.Deliveries["SENT"]+c.Deliveries["FAILED"]+c.Deliveries["CANCELLED"])
	var calls int
	heraldtest.WaitFor(t, 30*time.Second, "every SENT delivery's call to be in the simulator's records", func() bool {
		calls = 0
		for _, r := range e.sim.records(t) {
			if r.Outcome.Delivered() {
				calls++
			}
		}
		return calls >= c.Deliveries["SENT"]
	})
	for _, r := range e.sim.records(t) {
		require.True(t, held[r.Key], "provider call for delivery %s, which was not held by a worker when the cancel returned", r.Key)
	}
	t.Logf("%d calls before the cancel or in flight, %d deliveries cancelled", calls, c.Deliveries["CANCELLED"])
}
