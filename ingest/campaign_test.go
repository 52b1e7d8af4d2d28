package ingest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/campaign"
)

// requireOneDeliveryPerChannel checks that no user of the campaign has two deliveries on a
// channel and returns the deliveries per channel.
func requireOneDeliveryPerChannel(t *testing.T, e *env, id string) map[string]int {
	t.Helper()
	ctx := context.Background()
	var dup int
	require.NoError(t, e.pool.QueryRow(ctx, `
SELECT count(*) FROM (SELECT n.user_id, d.channel FROM notification n JOIN delivery d ON d.notification_id = n.id
                      WHERE n.campaign_id = $1 GROUP BY 1, 2 HAVING count(*) > 1) AS x`, id).Scan(&dup))
	require.Zero(t, dup, "users with two deliveries on one channel")
	rows, err := e.pool.Query(ctx, `SELECT d.channel, count(*) FROM notification n JOIN delivery d ON d.notification_id = n.id
                                    WHERE n.campaign_id = $1 GROUP BY 1`, id)
	require.NoError(t, err)
	defer rows.Close()
	per := map[string]int{}
	for rows.Next() {
		var c string
		var n int
		require.NoError(t, rows.Scan(&c, &n))
		per[c] = n
	}
	require.NoError(t, rows.Err())
	return per
}

func TestCampaignByList(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS", "EMAIL")
	const users = 20_000
	quietEnd := e.directory(users)
	ids := make([]int64, 0, users+150)
	for g := int64(1); g <= users; g++ {
		ids = append(ids, g)
	}
	for g := int64(1_000_001); g <= 1_000_100; g++ { // not in the directory
		ids = append(ids, g)
	}
	ids = append(ids, ids[:50]...) // duplicates count once

	res := e.postCampaign("c1", map[string]any{"name": "winter sale", "template": "promo", "channels": []string{"SMS", "EMAIL"},
		"payload": map[string]any{"discount": 20}, "audience": map[string]any{"userIds": ids}})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	id := res.json(t)["id"].(string)
	require.Equal(t, "EXPANDING", res.json(t)["status"])
	require.Equal(t, campaignPath(id), res.header.Get("Location"))

	e.runExpander(campaign.ExpanderConfig{})
	c := e.waitCampaign(id, "ACTIVE", 2*time.Minute)
	require.EqualValues(t, users+100, c["audience"])
	require.EqualValues(t, users+100, c["expanded"])
	require.Equal(t, map[string]any{"opted_out": float64(2000), "no_contact": float64(2000), "unknown_user": float64(200)}, c["suppressed"])
	require.EqualValues(t, 16_000+20_000, c["deliveries"].(map[string]any)["PENDING"].(float64)+c["deliveries"].(map[string]any)["QUEUED"].(float64))
	require.Equal(t, map[string]int{"SMS": 16_000, "EMAIL": 20_000}, requireOneDeliveryPerChannel(t, e, id))

	// Quiet hours: users g%10 == 1 wait for the end of their window; the others are due now.
	ctx := context.Background()
	var quiet, quietAtEnd, dueNow int
	require.NoError(t, e.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE n.user_id % 10 = 1),
       count(*) FILTER (WHERE n.user_id % 10 = 1 AND d.next_attempt_at = $2),
       count(*) FILTER (WHERE n.user_id % 10 <> 1 AND d.next_attempt_at <= now())
FROM notification n JOIN delivery d ON d.notification_id = n.id WHERE n.campaign_id = $1`, id, quietEnd).
		Scan(&quiet, &quietAtEnd, &dueNow))
	require.Equal(t, 4000, quiet)
	require.Equal(t, quiet, quietAtEnd, "quiet-hour users wait for the window's end")
	require.Equal(t, 36_000-4000, dueNow)

	// The rules are the single POST's: the same user, the same answer.
	for _, u := range []int64{10, 11, 12, 13} {
		single := e.post(fmt.Sprintf("single-%d", u), map[string]any{"userId": u, "template": "promo", "channels": []string{"SMS", "EMAIL"}})
		require.Equal(t, http.StatusAccepted, single.status, "%s", single.body)
		var campaignResp []byte
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT response FROM notification WHERE campaign_id = $1 AND user_id = $2`, id, u).Scan(&campaignResp))
		require.Equal(t, single.json(t)["suppressed"], response{body: campaignResp}.json(t)["suppressed"], "user %d", u)
		var singleNext, campaignNext []time.Time
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT array_agg(next_attempt_at ORDER BY channel) FROM delivery WHERE notification_id = $1`,
			single.json(t)["id"]).Scan(&singleNext))
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT array_agg(d.next_attempt_at ORDER BY d.channel) FROM delivery d JOIN notification n ON n.id = d.notification_id
WHERE n.campaign_id = $1 AND n.user_id = $2`, id, u).Scan(&campaignNext))
		require.Len(t, campaignNext, len(singleNext), "user %d", u)
		if u%10 == 1 {
			require.Equal(t, singleNext, campaignNext, "user %d: the same quiet-hour deferral", u)
		}
	}

	// A campaign notification reads like any other.
	var nid string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT id::text FROM notification WHERE campaign_id = $1 AND user_id = 5`, id).Scan(&nid))
	got := e.do(http.MethodGet, "/api/notifications/"+nid, nil, nil)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
}

func TestCampaignBySegment(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	const users = 20_000
	quietEnd := e.directory(users)
	// vip (g%5 != 4) and locale de or de-AT (g%3 != 2).
	want, quietWant, opted, noPhone := 0, 0, 0, 0
	for g := 1; g <= users; g++ {
		if g%5 == 4 || g%3 == 2 {
			continue
		}
		want++
		switch g % 10 {
		case 0:
			opted++
		case 2:
			noPhone++
		default:
			if g%10 == 1 {
				quietWant++
			}
		}
	}
	res := e.postCampaign("s1", map[string]any{"name": "vip de", "template": "promo", "channels": []string{"SMS"},
		"audience": map[string]any{"segment": map[string]any{"tags": []string{"vip"}, "locale": "de"}}})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	id := res.json(t)["id"].(string)
	require.EqualValues(t, want, e.campaign(id)["audience"], "the audience is counted at start")

	e.runExpander(campaign.ExpanderConfig{})
	c := e.waitCampaign(id, "ACTIVE", 2*time.Minute)
	require.EqualValues(t, want, c["audience"])
	require.EqualValues(t, want, c["expanded"])
	require.Equal(t, map[string]any{"opted_out": float64(opted), "no_contact": float64(noPhone)}, c["suppressed"])
	require.Equal(t, map[string]int{"SMS": want - opted - noPhone}, requireOneDeliveryPerChannel(t, e, id))
	require.NotZero(t, quietWant)
	var deferred int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM notification n JOIN delivery d ON d.notification_id = n.id
WHERE n.campaign_id = $1 AND d.next_attempt_at = $2`, id, quietEnd).Scan(&deferred))
	require.Equal(t, quietWant, deferred, "quiet-hour users wait for the window's end")
	var outside int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM notification n JOIN user_contact u USING (user_id)
WHERE n.campaign_id = $1 AND (NOT u.tags @> '{vip}' OR u.locale NOT IN ('de', 'de-AT'))`, id).Scan(&outside))
	require.Zero(t, outside, "only users of the segment")
}
