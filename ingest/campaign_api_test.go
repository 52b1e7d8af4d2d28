package ingest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/campaign"
	"github.com/heraldhq/herald/internal/delivery"
)

// campaignRows counts campaign, recipient, notification and delivery rows.
func (e *env) campaignRows() [4]int {
	e.t.Helper()
	var n [4]int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM campaign),
       (SELECT count(*) FROM campaign_recipient), (SELECT count(*) FROM notification), (SELECT count(*) FROM delivery)`).
		Scan(&n[0], &n[1], &n[2], &n[3]))
	return n
}

func TestCampaignReplay(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	body := `{"name":"n","template":"promo","channels":["SMS"],"audience":{"userIds":[3,1,2]},"start":false}`
	first := e.postCampaign("k", body)
	require.Equal(t, http.StatusAccepted, first.status, "%s", first.body)
	require.Empty(t, first.header.Get("Idempotent-Replayed"))
	require.Equal(t, "DRAFT", first.json(t)["status"])

	// The same request written differently (order of ids, members; a duplicate id).
	same := e.postCampaign("k", `{"start":false,"audience":{"userIds":[1,2,3,3]},"channels":["SMS"],"priority":"LOW","template":"promo","name":"n"}`)
	require.Equal(t, http.StatusAccepted, same.status, "%s", same.body)
	require.Equal(t, "true", same.header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.body), string(same.body))
	require.Equal(t, first.header.Get("Location"), same.header.Get("Location"))

	other := e.postCampaign("k", strings.Replace(body, `[3,1,2]`, `[3,1,2,4]`, 1))
	requireProblem(t, other, http.StatusUnprocessableEntity, codeIdempotencyKeyReused)
	require.Equal(t, [4]int{1, 3, 0, 0}, e.campaignRows())
	require.EqualValues(t, 3, e.campaign(first.json(t)["id"].(string))["audience"])
}

func TestCampaignBadInput(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	ids := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(i + 1)
		}
		return out
	}
	ok := map[string]any{"name": "n", "template": "promo", "channels": []string{"SMS"}, "audience": map[string]any{"userIds": []int64{1}}}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range ok {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		key     string
		body    any
		status  int
		code    string
		contain string
	}{
		{"missing Idempotency-Key", "", ok, 400, codeValidationFailed, ""},
		{"unknown template", "k", with("template", "nope"), 422, codeUnknownTemplate, ""},
		{"channel the template lacks", "k", with("channels", []string{"EMAIL"}), 400, codeValidationFailed, ""},
		{"no audience", "k", with("audience", nil), 400, codeValidationFailed, ""},
		{"both audiences", "k", with("audience", map[string]any{"userIds": []int64{1}, "segment": map[string]any{}}), 400, codeValidationFailed, ""},
		{"bad user id", "k", with("audience", map[string]any{"userIds": []int64{0}}), 400, codeValidationFailed, ""},
		{"empty list started", "k", with("audience", map[string]any{"userIds": []int64{}}), 400, codeValidationFailed, ""},
		{"bad tag", "k", with("audience", map[string]any{"segment": map[string]any{"tags": []string{"Not A Tag"}}}), 400, codeValidationFailed, ""},
		{"bad priority", "k", with("priority", "URGENT"), 400, codeValidationFailed, ""},
		{"no name", "k", with("name", nil), 400, codeValidationFailed, ""},
		{"expired", "k", with("expiresAt", "2001-01-01T00:00:00Z"), 400, codeValidationFailed, ""},
		{"over 100,000 ids", "k", with("audience", map[string]any{"userIds": ids(100_001)}), 413, codeAudienceTooLarge, "100000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(http.MethodPost, "/api/campaigns", tc.body, map[string]string{"Idempotency-Key": tc.key})
			p := requireProblem(t, res, tc.status, tc.code)
			if tc.contain != "" {
				require.Contains(t, p["detail"], tc.contain)
			}
			require.Equal(t, [4]int{}, e.campaignRows(), "nothing written")
		})
	}

	// Exactly 100,000 ids is within the limit.
	res := e.postCampaign("max", with("audience", map[string]any{"userIds": ids(100_000)}))
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	started := res.json(t)["id"].(string)

	draft := e.postCampaign("draft", with("start", false))
	require.Equal(t, http.StatusAccepted, draft.status, "%s", draft.body)
	did := draft.json(t)["id"].(string)
	before := e.campaignRows()
	for _, tc := range []struct {
		name   string
		path   string
		body   any
		status int
		code   string
	}{
		{"recipients of a started campaign", campaignPath(started, "recipients"), map[string]any{"userIds": []int64{7}}, 409, codeCampaignConflict},
		{"recipients over 100,000", campaignPath(did, "recipients"), map[string]any{"userIds": ids(100_001)}, 413, codeAudienceTooLarge},
		{"recipients missing", campaignPath(did, "recipients"), map[string]any{}, 400, codeValidationFailed},
		{"recipients of an unknown campaign", campaignPath("0190a0a0-0000-7000-8000-000000000000", "recipients"), map[string]any{"userIds": []int64{7}}, 404, codeNotFound},
		{"malformed id", campaignPath("nope", "start"), nil, 404, codeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireProblem(t, e.do(http.MethodPost, tc.path, tc.body, nil), tc.status, tc.code)
			require.Equal(t, before, e.campaignRows(), "nothing written")
		})
	}

	// A DRAFT takes more recipients (duplicates count once), then starts; a cancelled
	// campaign cannot start.
	res = e.do(http.MethodPost, campaignPath(did, "recipients"), map[string]any{"userIds": []int64{1, 2, 2, 3}}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.EqualValues(t, 3, res.json(t)["audience"])
	res = e.do(http.MethodPost, campaignPath(did, "cancel"), nil, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Equal(t, "CANCELLED", res.json(t)["status"])
	requireProblem(t, e.do(http.MethodPost, campaignPath(did, "start"), nil, nil), 409, codeCampaignConflict)
}

func TestUserTags(t *testing.T) {
	e := newEnv(t)
	res := e.do(http.MethodPut, "/api/users/9", map[string]any{"tags": []string{"vip", "beta", "vip"}}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Equal(t, []any{"beta", "vip"}, res.json(t)["tags"])
	got := e.do(http.MethodGet, "/api/users/9", nil, nil)
	require.Equal(t, []any{"beta", "vip"}, got.json(t)["tags"])
	requireProblem(t, e.do(http.MethodPut, "/api/users/9", map[string]any{"tags": []string{"Not A Tag"}}, nil), 400, codeValidationFailed)
	got = e.do(http.MethodPut, "/api/users/9", map[string]any{}, nil)
	require.Equal(t, []any{}, got.json(t)["tags"], "a PUT replaces the profile, tags included")
}

func TestCampaignVisibleToItsClientOnly(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	res := e.postCampaign("k", map[string]any{"name": "n", "template": "promo", "channels": []string{"SMS"}, "audience": map[string]any{"userIds": []int64{1}}, "start": false})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	id := res.json(t)["id"].(string)

	other, err := apikey.CreateAPIClient(context.Background(), e.pool, "other", apikey.AllScopes())
	require.NoError(t, err)
	auth := map[string]string{"Authorization": "Bearer " + other.Key}
	for _, path := range []string{campaignPath(id)} {
		requireProblem(t, e.do(http.MethodGet, path, nil, auth), 404, codeNotFound)
	}
	for _, action := range []string{"start", "cancel"} {
		requireProblem(t, e.do(http.MethodPost, campaignPath(id, action), nil, auth), 404, codeNotFound)
	}
	require.Equal(t, "DRAFT", e.campaign(id)["status"])

	// Scopes: creating needs campaigns:write, reading notifications:read.
	sender, err := apikey.CreateAPIClient(context.Background(), e.pool, "sender", []apikey.Scope{apikey.ScopeNotificationsSend, apikey.ScopeNotificationsRead})
	require.NoError(t, err)
	requireProblem(t, e.do(http.MethodPost, "/api/campaigns", "{}", map[string]string{"Authorization": "Bearer " + sender.Key, "Idempotency-Key": "x"}),
		403, codeInsufficientScope)
}

// A cancel ends every delivery not yet taken by a worker CANCELLED, leaves a SENDING one to
// its worker, and stops the expansion: nothing more is written after it returns.
func TestCampaignCancel(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	e.directory(3000)
	list := make([]int64, 3000)
	for i := range list {
		list[i] = int64(i + 1)
	}
	res := e.postCampaign("k", map[string]any{"name": "n", "template": "promo", "channels": []string{"SMS"}, "audience": map[string]any{"userIds": list}})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	id := res.json(t)["id"].(string)

	// One lot by hand, as an expander would write it; then a worker takes one delivery.
	x, err := campaign.NewExpander(campaign.ExpanderConfig{}, e.pool, nil)
	require.NoError(t, err)
	worked, _, err := x.ExpandLot(context.Background())
	require.NoError(t, err)
	require.True(t, worked)
	var sending string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT d.id::text FROM delivery d JOIN notification n ON n.id = d.notification_id
WHERE n.campaign_id = $1 AND d.next_attempt_at <= now() LIMIT 1`, id).Scan(&sending))
	_, _, ok, err := delivery.Claim(context.Background(), e.pool, sending, 0)
	require.NoError(t, err)
	require.True(t, ok)

	res = e.do(http.MethodPost, campaignPath(id, "cancel"), nil, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	c := res.json(t)
	require.Equal(t, "CANCELLED", c["status"])
	require.EqualValues(t, 1000, c["expanded"])
	d := c["deliveries"].(map[string]any)
	require.EqualValues(t, 1, d["SENDING"])
	require.EqualValues(t, 0, d["PENDING"])
	require.EqualValues(t, 0, d["QUEUED"])
	require.EqualValues(t, 1000-100-100-1, d["CANCELLED"]) // 100 opted out, 100 without phone, 1 SENDING

	// The expander finds nothing more to do: the campaign stays at its first lot.
	before := e.campaignRows()
	worked, _, err = x.ExpandLot(context.Background())
	require.NoError(t, err)
	require.False(t, worked)
	require.Equal(t, before, e.campaignRows())
	require.EqualValues(t, 1000, e.campaign(id)["expanded"])

	// Cancelling again changes nothing; the SENDING delivery's outcome is its worker's.
	res = e.do(http.MethodPost, campaignPath(id, "cancel"), nil, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.EqualValues(t, 1, res.json(t)["deliveries"].(map[string]any)["SENDING"])
}

// Campaigns take turns lot by lot: a large campaign does not hold back one started after it.
func TestCampaignsTakeTurns(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "SMS")
	e.directory(100)
	var ids []string
	for _, key := range []string{"a", "b"} {
		res := e.postCampaign(key, map[string]any{"name": key, "template": "promo", "channels": []string{"SMS"},
			"audience": map[string]any{"segment": map[string]any{}}})
		require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
		ids = append(ids, res.json(t)["id"].(string))
	}
	x, err := campaign.NewExpander(campaign.ExpanderConfig{LotSize: 10}, e.pool, nil)
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		worked, _, err := x.ExpandLot(context.Background())
		require.NoError(t, err)
		require.True(t, worked)
	}
	require.EqualValues(t, 20, e.campaign(ids[0])["expanded"])
	require.EqualValues(t, 20, e.campaign(ids[1])["expanded"])
}
