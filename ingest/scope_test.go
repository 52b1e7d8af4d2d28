package ingest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/apikey"
)

func TestParseScopes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []apikey.Scope
		err  string
	}{
		{in: "notifications:send", want: []apikey.Scope{apikey.ScopeNotificationsSend}},
		{in: "users:write, users:read", want: []apikey.Scope{apikey.ScopeUsersRead, apikey.ScopeUsersWrite}},
		{in: "operator,operator", want: []apikey.Scope{apikey.ScopeOperator}},
		{in: "templates:write,,campaigns:write,", want: []apikey.Scope{apikey.ScopeTemplatesWrite, apikey.ScopeCampaignsWrite}},
		{in: strings.ReplaceAll(apikey.JoinScopes(apikey.AllScopes()), ",", " , "), want: apikey.AllScopes()},
		{in: "", err: "no scope given"},
		{in: " , ", err: "no scope given"},
		{in: "users:wrte", err: `scope "users:wrte": unknown scope`},
		{in: "notifications:send,admin", err: `scope "admin": unknown scope`},
		{in: "Operator", err: "unknown scope"},
		{in: "notifications:*", err: "unknown scope"},
	} {
		got, err := apikey.ParseScopes(tc.in)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
	_, err := apikey.ParseScopes("nope")
	require.ErrorIs(t, err, apikey.ErrUnknownScope)
	require.Equal(t, []apikey.Scope{apikey.ScopeNotificationsSend, apikey.ScopeNotificationsRead}, apikey.DefaultScopes())
}

func TestGrants(t *testing.T) {
	require.True(t, apikey.HasScope([]apikey.Scope{apikey.ScopeUsersRead}, apikey.ScopeUsersRead))
	require.False(t, apikey.HasScope([]apikey.Scope{apikey.ScopeUsersRead}, apikey.ScopeUsersWrite), "read does not imply write")
	require.False(t, apikey.HasScope([]apikey.Scope{apikey.ScopeUsersWrite}, apikey.ScopeUsersRead), "write does not imply read")
	require.False(t, apikey.HasScope(nil, apikey.ScopeNotificationsSend))
	for _, s := range apikey.AllScopes() {
		require.True(t, apikey.HasScope([]apikey.Scope{apikey.ScopeOperator}, s), "operator implies %s", s)
	}
}

// scopeCase is a request to one route that succeeds (and, for a write, changes something)
// with a key holding the route's scope.
type scopeCase struct {
	method, path string
	body         string
	header       map[string]string
	ok           int
}

var scopeCases = []scopeCase{
	{http.MethodPost, "/api/notifications", `{"userId":5,"template":"otp","channels":["SMS"]}`, map[string]string{"Idempotency-Key": "scoped"}, http.StatusAccepted},
	{http.MethodGet, "/api/notifications/{id}", "", nil, http.StatusOK},
	{http.MethodPut, "/api/users/{userId}", `{"phone":"+15551239999","webhookUrl":"https://attacker.example/hook"}`, nil, http.StatusOK},
	{http.MethodGet, "/api/users/{userId}", "", nil, http.StatusOK},
	{http.MethodPut, "/api/users/{userId}/preferences", `{"optOuts":[{"channel":"SMS"}]}`, nil, http.StatusOK},
	{http.MethodGet, "/api/users/{userId}/preferences", "", nil, http.StatusOK},
	{http.MethodPut, "/api/templates/{name}", `{"category":"security","channels":["SMS"],"content":{"SMS":{"default":{"text":"changed"}}}}`, nil, http.StatusOK},
	{http.MethodGet, "/api/templates/{name}", "", nil, http.StatusOK},
	{http.MethodPost, "/api/campaigns", `{"name":"n","template":"otp","channels":["SMS"],"audience":{"userIds":[5]},"start":false}`, map[string]string{"Idempotency-Key": "scoped"}, http.StatusAccepted},
	{http.MethodGet, "/api/campaigns/{id}", "", nil, http.StatusOK},
	{http.MethodPost, "/api/campaigns/{id}/recipients", `{"userIds":[6]}`, nil, http.StatusOK},
	{http.MethodPost, "/api/campaigns/{id}/start", "", nil, http.StatusOK},
	{http.MethodPost, "/api/campaigns/{id}/cancel", "", nil, http.StatusOK},
	{http.MethodPost, "/api/redrives", `{"filter":{"status":["FAILED"]},"dryRun":true}`, map[string]string{"Idempotency-Key": "scoped"}, http.StatusAccepted},
	{http.MethodGet, "/api/redrives/{id}", "", nil, http.StatusOK},
	{http.MethodPost, "/api/webhook-endpoints", `{"url":"https://hooks.example.com/events"}`, nil, http.StatusCreated},
	{http.MethodGet, "/api/webhook-endpoints", "", nil, http.StatusOK},
	{http.MethodGet, "/api/webhook-endpoints/{id}", "", nil, http.StatusOK},
	{http.MethodDelete, "/api/webhook-endpoints/{id}", "", nil, http.StatusNoContent},
	{http.MethodGet, "/api/webhook-endpoints/{id}/attempts", "", nil, http.StatusOK},
	{http.MethodPost, "/api/webhook-endpoints/{id}/replay", `{"since":"2020-01-01T00:00:00Z"}`, nil, http.StatusAccepted},
	{http.MethodPost, "/api/webhook-endpoints/{id}/enable", "", nil, http.StatusOK},
}

// snapshot is every row a request could change, as text.
func snapshot(t *testing.T, e *env) string {
	t.Helper()
	var out []string
	for _, table := range []string{"api_client", "template", "user_contact", "push_token", "user_preference", "notification", "delivery", "delivery_attempt", "campaign", "campaign_recipient", "redrive", "webhook_endpoint", "webhook_message"} {
		var s string
		require.NoError(t, e.pool.QueryRow(context.Background(),
			`SELECT coalesce(string_agg(x::text, '|' ORDER BY x::text), '') FROM `+table+` x`).Scan(&s))
		out = append(out, table+": "+s)
	}
	return strings.Join(out, "\n")
}

// TestInsufficientScope: for every route, a key holding every scope but the ones the route
// accepts gets 403 insufficient_scope naming the scope, and no row changes; the same request
// with a key holding only the route's scope (or only operator) goes through.
func TestInsufficientScope(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS")
	e.user(5, map[string]any{"phone": "+15551234567"})
	res := e.post("first", `{"userId":5,"template":"otp","channels":["SMS"]}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	notificationID := res.json(t)["id"].(string)
	res = e.postCampaign("first", `{"name":"n","template":"otp","channels":["SMS"],"audience":{"userIds":[5]},"start":false}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	campaignID := res.json(t)["id"].(string)
	operator := e.newKey(apikey.ScopeOperator)
	res = e.postRedrive("first", `{"filter":{"status":["FAILED"]},"dryRun":true}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	redriveID := res.json(t)["id"].(string)

	table := routes(&API{})
	require.Len(t, scopeCases, len(table), "one case per route")
	for i, rt := range table {
		tc := scopeCases[i]
		require.Equal(t, rt.method+" "+rt.path, tc.method+" "+tc.path)
		path := strings.NewReplacer("{id}", notificationID, "{userId}", "5", "{name}", "otp").Replace(tc.path)
		if strings.HasPrefix(tc.path, "/api/campaigns/") {
			path = strings.Replace(tc.path, "{id}", campaignID, 1)
		}
		if strings.HasPrefix(tc.path, "/api/redrives/") {
			path = strings.Replace(tc.path, "{id}", redriveID, 1)
		}
		if strings.HasPrefix(tc.path, "/api/webhook-endpoints/") {
			// A fresh endpoint of the env's client per route, disabled so that enable
			// changes it; an event of the client's in the outbox for replay to owe it.
			path = strings.Replace(tc.path, "{id}", e.disabledEndpoint(), 1)
		}
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var others []apikey.Scope
			for _, s := range apikey.AllScopes() {
				if s != apikey.ScopeOperator && !slices.Contains(rt.scopes, s) {
					others = append(others, s)
				}
			}
			lacking := e.newKey(others...)
			before := snapshot(t, e)
			res := e.do(tc.method, path, nilIfEmpty(tc.body), withAuth(tc.header, lacking))
			p := requireProblem(t, res, http.StatusForbidden, codeInsufficientScope)
			for _, s := range rt.scopes {
				require.Contains(t, p["detail"], string(s), "the detail names the needed scope")
			}
			require.Contains(t, res.header.Get("WWW-Authenticate"), `error="insufficient_scope"`)
			require.Equal(t, before, snapshot(t, e), "a refused request changes nothing")

			allowed := []string{e.newKey(rt.scopes[0]), operator}
			if strings.Contains(tc.path, "{id}") {
				// A notification or a campaign is visible only to the client that created it
				// (404 to any other, whatever its scopes): the creator reads or changes it.
				allowed = []string{e.key}
			}
			for _, key := range allowed {
				res = e.do(tc.method, path, nilIfEmpty(tc.body), withAuth(tc.header, key))
				require.Equal(t, tc.ok, res.status, "%s", res.body)
			}
			if tc.method != http.MethodGet {
				require.NotEqual(t, before, snapshot(t, e), "the allowed request did write")
			}
		})
	}
}

// newKey creates an API client with scopes and returns its key.
func (e *env) newKey(scopes ...apikey.Scope) string {
	e.t.Helper()
	c, err := apikey.CreateAPIClient(context.Background(), e.pool, "scoped", scopes)
	require.NoError(e.t, err)
	return c.Key
}

func withAuth(h map[string]string, key string) map[string]string {
	out := map[string]string{"Authorization": "Bearer " + key}
	for k, v := range h {
		out[k] = v
	}
	return out
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
