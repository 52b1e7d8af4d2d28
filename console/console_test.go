package console_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/console"
	"github.com/heraldhq/herald/internal/delivery"
)

type page struct {
	status   int
	location string
	body     string
	cookies  []*http.Cookie
}

func (e *env) get(c *http.Client, path string) page {
	e.t.Helper()
	return e.doReq(c, http.MethodGet, path, nil)
}

func (e *env) login(c *http.Client, key, next string) page {
	e.t.Helper()
	return e.doReq(c, http.MethodPost, "/console/login", url.Values{"key": {key}, "next": {next}})
}

func (e *env) doReq(c *http.Client, method, path string, form url.Values) page {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	require.NoError(e.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := c.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return page{status: res.StatusCode, location: res.Header.Get("Location"), body: string(b), cookies: res.Cookies()}
}

// TestConsoleRequiresTheOperatorScope: without a session every page redirects to the login;
// an unknown key is 401 and a key without the operator scope 403, neither with a session;
// an operator key gets an HttpOnly, SameSite=Strict, expiring session. A forged cookie, a
// revoked client and a client that lost the scope lose access at their next request.
func TestConsoleRequiresTheOperatorScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client()
	nid := e.notificationOf(e.sent)

	for _, path := range []string{"/console/", "/console/notifications/" + nid, "/console/lag", "/console/traces/" + traceID} {
		res := e.get(c, path)
		require.Equal(t, http.StatusSeeOther, res.status, path)
		require.Equal(t, "/console/login?next="+strings.TrimPrefix(path, "/console"), res.location, path)
	}
	require.Equal(t, http.StatusOK, e.get(c, "/console/login").status)

	res := e.login(c, "hk_"+strings.Repeat("x", 43), "/")
	require.Equal(t, http.StatusUnauthorized, res.status)
	require.Contains(t, res.body, "unknown or revoked API key")
	require.Empty(t, res.cookies)

	res = e.login(c, e.readerKey, "/")
	require.Equal(t, http.StatusForbidden, res.status)
	require.Contains(t, res.body, "lacks the operator scope")
	require.Empty(t, res.cookies)
	require.Equal(t, http.StatusSeeOther, e.get(c, "/console/").status, "still no session")

	res = e.login(c, e.operatorKey, "/lag")
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/console/lag", res.location)
	require.Len(t, res.cookies, 1)
	ck := res.cookies[0]
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.Equal(t, "/console", ck.Path)
	require.Equal(t, int(console.DefaultSessionTTL.Seconds()), ck.MaxAge)
	require.NotContains(t, ck.Value, e.operatorKey, "the key is not in the cookie")
	require.Equal(t, http.StatusOK, e.get(c, "/console/").status)
	require.Equal(t, http.StatusOK, e.get(c, "/console/notifications/"+nid).status)

	// Off-site next pages are ignored.
	require.Equal(t, "/console/", e.login(c, e.operatorKey, "//evil.example/").location)
	require.Equal(t, "/console/", e.login(c, e.operatorKey, "https://evil.example/").location)

	// A forged cookie: the login page.
	forged := e.client()
	u, err := url.Parse(e.srv.URL + "/console/")
	require.NoError(t, err)
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value[:len(ck.Value)-4] + "AAAA", Path: "/console"}})
	require.Equal(t, http.StatusSeeOther, e.get(forged, "/console/").status)

	// The client loses the operator scope: 403; it is revoked: the login page.
	ctx := context.Background()
	_, err = e.pool.Exec(ctx, `UPDATE api_client SET scopes = '{notifications:read}' WHERE name = 'ops'`)
	require.NoError(t, err)
	res = e.get(c, "/console/")
	require.Equal(t, http.StatusForbidden, res.status)
	require.Contains(t, res.body, "lacks the operator scope")
	_, err = e.pool.Exec(ctx, `UPDATE api_client SET revoked_at = now() WHERE name = 'ops'`)
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, e.get(c, "/console/").status)

	// Logging out ends the session.
	_, err = e.pool.Exec(ctx, `UPDATE api_client SET revoked_at = NULL, scopes = '{operator}' WHERE name = 'ops'`)
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status)
	require.Equal(t, http.StatusOK, e.get(c, "/console/").status)
	require.Equal(t, "/console/login", e.doReq(c, http.MethodPost, "/console/logout", url.Values{}).location)
	require.Equal(t, http.StatusSeeOther, e.get(c, "/console/").status)
}

// TestConsoleShowsNoPersonalData: the stored phone number, e-mail address, push token,
// payload and error text appear on no page; ids, statuses and codes do.
func TestConsoleShowsNoPersonalData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client()
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status)
	nid := e.notificationOf(e.sent)
	pages := map[string]string{}
	for _, path := range []string{"/console/", "/console/?user=7", "/console/notifications/" + nid,
		"/console/notifications/" + e.sent, "/console/lag", "/console/?user=x", "/console/traces/" + traceID} {
		res := e.get(c, path)
		require.Contains(t, []int{http.StatusOK, http.StatusBadRequest}, res.status, path)
		pages[path] = res.body
		for _, pii := range []string{piiPhone, piiEmail, piiPayload, piiToken, "unavailable for"} {
			require.NotContains(t, res.body, pii, "%s shows personal data", path)
		}
	}
	require.Contains(t, pages["/console/"], e.sent)
	tl := pages["/console/notifications/"+nid]
	require.Contains(t, tl, traceID)
	require.Contains(t, tl, `href="`+e.jaeger.srv.URL+`/trace/`+traceID+`"`)
	require.Contains(t, tl, `href="/console/traces/`+traceID+`" id="trace-view"`)
	require.Contains(t, tl, "attempt 1 ERROR TRANSIENT (503), retry")
	require.Contains(t, tl, "sim-1001")
	require.Equal(t, tl, pages["/console/notifications/"+e.sent], "a delivery id opens its notification")
	lag := pages["/console/lag"]
	require.Contains(t, lag, `http-equiv="refresh"`)
	require.Regexp(t, `<td>sim-sms</td><td class="num">2</td><td class="num">0.0</td><td class="num">\d</td><td class="num">50</td>`, lag)
	require.Contains(t, lag, "not configured in this process")
	// Due PENDING and QUEUED per lane: NORMAL and LOW have one due PENDING row each.
	lanes := map[string]string{}
	for _, row := range strings.Split(lag, "<tr>") {
		if m := laneRow.FindStringSubmatch(row); m != nil {
			lanes[m[1]] = m[2] + " due, " + m[3] + " queued"
		}
	}
	require.Equal(t, map[string]string{"HIGH": "0 due, 0 queued", "NORMAL": "1 due, 0 queued", "LOW": "1 due, 0 queued"}, lanes)
	require.Contains(t, lag, "no such slot")
	require.Equal(t, http.StatusNotFound, e.get(c, "/console/notifications/0193a0b0-0000-7000-8000-000000000000").status)
}

var laneRow = regexp.MustCompile(`^<td>(HIGH|NORMAL|LOW)</td>(?s:.*)<td class="num">(\d+)</td><td class="num">[^<]+</td><td class="num">(\d+)</td></tr>`)

var rowLink = regexp.MustCompile(`href="/console/notifications/[0-9a-f-]{36}" class="mono">([0-9a-f-]{36})</a>`)
var nextLink = regexp.MustCompile(`href="/console/\?([^"]+)" id="next"`)

func rowsOf(body string) []string {
	var ids []string
	for _, m := range rowLink.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestConsoleMessageLogFiltersAndPages: newest first, one page at a time through the cursor,
// each filter alone, and a bad filter refused with 400.
func TestConsoleMessageLogFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.serve(console.Config{PageSize: 1})
	c := e.client()
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status)

	all := []string{e.pending[1], e.pending[0], e.sent} // newest first
	var seen []string
	for path, pages := "/console/", 0; path != ""; pages++ {
		require.Less(t, pages, 10)
		res := e.get(c, path)
		require.Equal(t, http.StatusOK, res.status)
		seen = append(seen, rowsOf(res.body)...)
		path = ""
		if m := nextLink.FindStringSubmatch(res.body); m != nil {
			path = "/console/?" + html.UnescapeString(m[1])
		}
	}
	require.Equal(t, all, seen)

	e.serve(console.Config{})
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status, "each console signs with a key of its own")
	future := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")
	past := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")
	for q, want := range map[string][]string{
		"":                   all,
		"status=SENT":        {e.sent},
		"status=PENDING":     {e.pending[1], e.pending[0]},
		"user=8":             {e.pending[0]},
		"channel=PUSH":       {e.pending[1]},
		"priority=HIGH":      {e.sent},
		"template=welcome":   {e.pending[0]},
		"from=" + past:       all,
		"from=" + future:     nil,
		"to=" + past:         nil,
		"status=SENT&user=8": nil,
	} {
		res := e.get(c, "/console/?"+q)
		require.Equal(t, http.StatusOK, res.status, q)
		require.Equal(t, want, rowsOf(res.body), q)
	}
	for _, q := range []string{"user=-1", "status=LOST", "channel=FAX", "priority=URGENT", "from=yesterday", "cursor=nope"} {
		res := e.get(c, "/console/?"+q)
		require.Equal(t, http.StatusBadRequest, res.status, q)
		require.Contains(t, res.body, `id="error"`, q)
	}
}

// TestConsoleShowsReceipts: a delivery that a provider's receipt refined shows the DELIVERED
// or UNDELIVERED step with the receipt that made it, and the receipts with their codes.
func TestConsoleShowsReceipts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client()
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status)
	_, err := delivery.ApplyReceipt(context.Background(), e.pool, delivery.Receipt{DeliveryID: e.sent, Provider: "sms:twilio",
		Status: "undelivered", Code: "30005", Result: herald.StatusUndelivered, At: time.Now()}, time.Minute)
	require.NoError(t, err)
	page := e.get(c, "/console/notifications/"+e.sent).body
	require.Contains(t, page, "receipt sms:twilio undelivered (30005)")
	require.Contains(t, page, `<span class="badge">UNDELIVERED</span>`)
	require.Contains(t, page, "<td>30005</td>")
}
