package console_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/console"
)

var spanRow = regexp.MustCompile(`<tr class="span( failed)?" data-span="[0-9a-f]{16}" data-depth="(\d+)"><td class="op d\d+">([^<]+)</td><td>([^<]+)</td><td class="num">\+([0-9.]+)</td><td class="num">([0-9.]+)</td><td class="tags">(.*)</td></tr>`)

// TestConsoleTraceViewShowsTheTree: the trace view reads the trace from Jaeger's query API
// and shows its spans as a tree in start order (children under their CHILD_OF parent,
// siblings by start), with service, offset, duration and only the whitelisted tags: the
// phone number in a tag, an error text and a URL query stay hidden.
func TestConsoleTraceViewShowsTheTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client()
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status)

	res := e.get(c, "/console/traces/"+traceID)
	require.Equal(t, http.StatusOK, res.status, res.body)
	type row struct{ depth, name, service, offset, duration, tags string }
	var (
		rows   []row
		failed []string
	)
	for _, m := range spanRow.FindAllStringSubmatch(res.body, -1) {
		rows = append(rows, row{m[2], html.UnescapeString(m[3]), m[4], m[5], m[6], m[7]})
		if m[1] != "" {
			failed = append(failed, m[3])
		}
	}
	require.Equal(t, []string{"sms:twilio POST"}, failed, "the span with error=true is marked")
	tags := func(kv ...string) string {
		var b strings.Builder
		for i := 0; i < len(kv); i += 2 {
			b.WriteString(`<span class="tag">` + kv[i] + `=<b>` + kv[i+1] + `</b></span>`)
		}
		return b.String()
	}
	require.Equal(t, []row{
		{"0", "POST /api/notifications", "herald-api", "0.000", "12.250", tags("http.request.method", "POST", "http.response.status_code", "202")},
		{"1", "ingest.accept", "herald-api", "1.000", "9.000", tags("herald.notification_id", "0193a0b0-0000-7000-8000-0000000000e1")},
		{"2", "cdc publish", "herald-api", "20.000", "3.000", tags("herald.delivery_id", "0193a0b0-0000-7000-8000-0000000000d1", "herald.commit_lsn", "0/1A2B3C4")},
		{"3", "dispatch.deliver", "herald-dispatch", "30.000", "140.000", tags("herald.delivery_id", "0193a0b0-0000-7000-8000-0000000000d1")},
		{"4", "dispatch.lease", "herald-dispatch", "31.000", "1.500", tags("herald.lease.held", "true")},
		{"4", "dispatch.send", "herald-dispatch", "45.000", "120.500", tags("herald.attempt", "1", "herald.provider", "sim-sms")},
		{"5", "sms:twilio POST", "herald-dispatch", "46.000", "118.000", tags("http.response.status_code", "503", "error", "true")},
	}, rows)
	require.Contains(t, res.body, "7 spans · 170.000 ms · services herald-api, herald-dispatch")
	require.Contains(t, res.body, `href="`+e.jaeger.srv.URL+`/trace/`+traceID+`" id="jaeger"`)
	for _, hidden := range []string{piiPhone, "PII-QUERY-5521", "herald.recipient", "otel.status_description", "url.query", "node-1"} {
		require.NotContains(t, res.body, hidden)
	}
	// An upper-case id is the same trace.
	require.Equal(t, http.StatusOK, e.get(c, "/console/traces/"+strings.ToUpper(traceID)).status)
}

// TestConsoleTraceViewRefusesAndExplains: a malformed trace id is 400 and never reaches
// Jaeger; a trace Jaeger does not hold is 404, an unreachable Jaeger 502 and a console
// without Jaeger 503, each with a message that says so.
func TestConsoleTraceViewRefusesAndExplains(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client()
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status)

	for _, id := range []string{"nothex", traceID[:31], traceID + "0", strings.Repeat("z", 32), "%2e%2e%2fapi%2fservices", traceID[:30] + "%3f"} {
		res := e.get(c, "/console/traces/"+id)
		require.Equal(t, http.StatusBadRequest, res.status, id)
		require.Contains(t, res.body, "a trace id is 32 hexadecimal digits", id)
	}
	require.Zero(t, e.jaeger.calls.Load(), "a bad id is not sent to Jaeger")

	res := e.get(c, "/console/traces/"+strings.Repeat("0", 31)+"1")
	require.Equal(t, http.StatusNotFound, res.status)
	require.Contains(t, res.body, "Jaeger holds no trace with this id")
	require.Equal(t, int64(1), e.jaeger.calls.Load())

	e.jaeger.srv.Close()
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status)
	res = e.get(c, "/console/traces/"+traceID)
	require.Equal(t, http.StatusBadGateway, res.status)
	require.Contains(t, res.body, "Jaeger did not answer with the trace within 3s")

	e.serve(console.Config{})
	require.Equal(t, http.StatusSeeOther, e.login(c, e.operatorKey, "/").status)
	res = e.get(c, "/console/traces/"+traceID)
	require.Equal(t, http.StatusServiceUnavailable, res.status)
	require.Contains(t, res.body, "Jaeger is not configured")
	nt := e.get(c, "/console/notifications/"+e.sent)
	require.Equal(t, http.StatusOK, nt.status)
	require.NotContains(t, nt.body, `id="trace-view"`, "no link to a view that cannot show the trace")
}
