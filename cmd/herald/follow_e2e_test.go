package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders/sim"
)

// TestEndToEndFollowOneNotification follows one SMS through ingest → relay → Kafka →
// dispatch → the simulated Twilio, refused twice (503) and then sent: herald trace by its
// Idempotency-Key shows the retries, GET /api/notifications/{id} the attempt log and the
// trace id, and the console (logged in with the operator key) the same timeline and live
// lag from the real Kafka groups — without the recipient's number or the payload.
func TestEndToEndFollowOneNotification(t *testing.T) {
	t.Parallel()
	e := newE2E(t, 1)
	e.sim.setFaults(t, sim.Twilio, `{"unavailable": 1, "retryAfter": "200ms"}`)
	before := e.sim.stats(t)[sim.Twilio].Outcomes[sim.Unavailable]
	const key = "follow-1"
	status, body, err := tryJSON(context.Background(), http.MethodPost, "http://"+e.addr+"/api/notifications", e.key, key,
		`{"userId": 1, "template": "otp", "channels": ["SMS"], "priority": "HIGH", "payload": {"code": "424242"}}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var accepted struct {
		ID         string
		Deliveries []delivery
	}
	require.NoError(t, json.Unmarshal(body, &accepted))
	heraldtest.WaitFor(t, 60*time.Second, "two refusals at twilio", func() bool {
		return e.sim.stats(t)[sim.Twilio].Outcomes[sim.Unavailable]-before >= 2
	})
	e.sim.setFaults(t, sim.Twilio, `{}`)
	e.waitAllFinal(t, 1, 60*time.Second)

	// herald trace, by the key of the test's client.
	out, err := runHerald(t, "trace", "--database-url", e.st.dsn, "--client", "e2e", key)
	require.NoError(t, err, out)
	require.Contains(t, out, "notification  "+accepted.ID)
	require.Regexp(t, `(?m)^trace\s+[0-9a-f]{32}$`, out)
	var steps []string
	for _, m := range stepLine.FindAllStringSubmatch(out, -1) {
		steps = append(steps, m[1])
	}
	require.GreaterOrEqual(t, len(steps), 7, out) // PENDING, (QUEUED,) 3 × SENDING, 2 × PENDING, SENT
	require.Equal(t, "PENDING", steps[0], out)
	require.Equal(t, []string{"SENDING", "SENT"}, steps[len(steps)-2:], out)
	require.GreaterOrEqual(t, strings.Count(out, ", retry\n"), 2, out)
	require.NotContains(t, out, "+1555010", "no phone number in the timeline")

	// The API: trace id and attempt log.
	var n struct {
		TraceID    string
		Deliveries []struct {
			Provider, ProviderMessageID string
			Attempts                    int
			AttemptLog                  []struct{ Outcome, ErrorClass, ProviderCode string }
		}
	}
	doJSON(t, http.MethodGet, "http://"+e.addr+"/api/notifications/"+accepted.ID, e.key, "", &n, http.StatusOK)
	require.Regexp(t, `^[0-9a-f]{32}$`, n.TraceID)
	require.Contains(t, out, n.TraceID, "herald trace and the API name the same trace")
	d := n.Deliveries[0]
	require.Len(t, d.AttemptLog, d.Attempts)
	require.NotEmpty(t, d.ProviderMessageID)
	last := d.AttemptLog[len(d.AttemptLog)-1]
	require.Equal(t, "SENT", last.Outcome)
	require.Equal(t, "ERROR", d.AttemptLog[0].Outcome)
	require.Contains(t, []string{"TRANSIENT", "AMBIGUOUS"}, d.AttemptLog[0].ErrorClass, "a 503 is retried")
	require.NotEmpty(t, d.AttemptLog[0].ProviderCode, "the provider's own code")

	// The console on the same listener.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	res, err := c.PostForm("http://"+e.addr+"/console/login", url.Values{"key": {e.key}, "next": {"/notifications/" + accepted.ID}})
	require.NoError(t, err)
	page, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", page)
	require.Contains(t, string(page), accepted.Deliveries[0].ID)
	require.Contains(t, string(page), n.TraceID)
	require.NotContains(t, string(page), "+1555010")
	require.NotContains(t, string(page), "424242", "no payload in the console")

	res, err = c.Get("http://" + e.addr + "/console/lag")
	require.NoError(t, err)
	page, err = io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NotContains(t, string(page), "Kafka did not answer")
	require.Contains(t, string(page), flagValue(t, e.st.args, "--relay-slot"), "the relay's slot (it may not exist yet: creating it waits for older transactions)")
	require.Contains(t, string(page), "<td>"+d.Provider+"</td>", "the provider's calls of the last minute")
}
