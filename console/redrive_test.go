package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
)

// TestConsoleRedrive: the re-drive page needs an operator session; its dry run shows the
// count and what would be skipped and changes no delivery; the confirm re-drives, once even
// when sent twice, under the operator's client, and leads to the re-drive's page; bad input
// shows a message and writes nothing; a cross-site POST is refused.
func TestConsoleRedrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	client := deliverytest.Client(t, e.pool)
	deliverytest.Failed(t, e.pool, 3, deliverytest.Spec{ClientID: client}, delivery.Outcome{Provider: "sms:twilio", ProviderCode: "503"})
	deliverytest.Failed(t, e.pool, 1, deliverytest.Spec{ClientID: client}, delivery.Outcome{AttemptClass: "PERMANENT", ProviderCode: "21211"})
	c := e.client()
	require.Equal(t, http.StatusSeeOther, e.get(c, "/console/redrives").status, "no session: the login page")
	require.Equal(t, http.StatusSeeOther, e.doReq(c, http.MethodPost, "/console/redrives", url.Values{"failed": {"1"}, "action": {"dry"}}).status)
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/redrives").status)
	require.Equal(t, http.StatusOK, e.get(c, "/console/redrives").status)

	states := func() string {
		var s string
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT string_agg(id || status || coalesce(redrive_id::text, '-'), ',' ORDER BY id) FROM delivery`).Scan(&s))
		return s
	}
	before := states()
	res := e.doReq(c, http.MethodPost, "/console/redrives", url.Values{"failed": {"1"}, "channel": {"SMS"}, "action": {"dry"}})
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.Contains(t, res.body, `<b id="matched">4</b> deliveries match; <b id="would">3</b> would be re-driven, 1 skipped (permanent)`)
	require.Equal(t, before, states(), "the dry run changes nothing")
	dry := regexp.MustCompile(`name="dry" value="([0-9a-f-]{36})"`).FindStringSubmatch(res.body)
	require.NotNil(t, dry, "a confirm form carries the dry run: %s", res.body)

	confirm := url.Values{"failed": {"1"}, "channel": {"SMS"}, "action": {"run"}, "dry": {dry[1]}}
	res = e.doReq(c, http.MethodPost, "/console/redrives", confirm)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.True(t, strings.HasPrefix(res.location, "/console/redrives/"))
	again := e.doReq(c, http.MethodPost, "/console/redrives", confirm)
	require.Equal(t, res.location, again.location, "a confirm sent twice is one re-drive")
	id := strings.TrimPrefix(res.location, "/console/redrives/")
	var who string
	var dryRun bool
	var n int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT client_id::text, dry_run, (SELECT count(*) FROM redrive WHERE NOT dry_run) FROM redrive WHERE id = $1`, id).Scan(&who, &dryRun, &n))
	require.False(t, dryRun)
	require.Equal(t, 1, n)
	var opClient string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT id::text FROM api_client WHERE name = 'ops'`).Scan(&opClient))
	require.Equal(t, opClient, who, "audited under the operator's client")
	page := e.get(c, res.location)
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, `<span class="badge" id="status">RUNNING</span>`)
	require.Contains(t, page.body, `http-equiv="refresh"`, "a RUNNING re-drive's page refreshes")
	require.Contains(t, e.get(c, "/console/redrives").body, id, "listed among the recent re-drives")

	// Bad input: a message, nothing written.
	var redrives int
	count := func() int {
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM redrive`).Scan(&redrives))
		return redrives
	}
	was := count()
	for form, msg := range map[string]string{
		"action=dry&channel=SMS":             "no status and no time range",
		"action=dry&expired=1":               "needs a new expiresAt",
		"action=dry&failed=1&from=yesterday": "from: not an RFC 3339 time",
		"action=dry&failed=1&from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z": "filter.to: must be after filter.from",
		"action=run&failed=1": "run the dry run first",
	} {
		v, err := url.ParseQuery(form)
		require.NoError(t, err)
		res := e.doReq(c, http.MethodPost, "/console/redrives", v)
		require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, res.status, form)
		require.Contains(t, res.body, msg, form)
	}
	require.Equal(t, was, count(), "refused forms write nothing")

	// A POST from another site is refused, session or not.
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/console/redrives", strings.NewReader(confirm.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
