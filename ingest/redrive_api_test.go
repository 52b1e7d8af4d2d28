package ingest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/redrive"
)

// postRedrive sends POST /api/redrives with an Idempotency-Key, as the env's client (an
// operator key) unless headers say otherwise.
func (e *env) postRedrive(key string, body any, headers ...map[string]string) response {
	e.t.Helper()
	h := map[string]string{"Idempotency-Key": key}
	for _, m := range headers {
		for k, v := range m {
			h[k] = v
		}
	}
	return e.do(http.MethodPost, "/api/redrives", body, h)
}

func (e *env) redrive(id string) map[string]any {
	e.t.Helper()
	res := e.do(http.MethodGet, "/api/redrives/"+id, nil, nil)
	require.Equal(e.t, http.StatusOK, res.status, "%s", res.body)
	return res.json(e.t)
}

// runRedrives runs a re-drive executor on the env's database until the test ends, polling
// every 10 ms, unpaced.
func (e *env) runRedrives() {
	e.t.Helper()
	x, err := redrive.New(redrive.Config{PollInterval: 10 * time.Millisecond, Rate: -1, LotSize: 2}, e.pool, zaptest.NewLogger(e.t))
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = x.Run(ctx)
	}()
	e.t.Cleanup(func() { cancel(); wg.Wait() })
}

func (e *env) waitRedrive(id string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.redrive(id)
		if r["status"] == redrive.StatusDone {
			return r
		}
		require.True(e.t, time.Now().Before(deadline), "re-drive %s not DONE: %v", id, r)
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// deliveryStates is every delivery's status, attempts and re-drive, as text.
func (e *env) deliveryStates() string {
	e.t.Helper()
	var s string
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(id || ' ' || status || ' ' || attempts || ' ' ||
		coalesce(redrive_id::text, '-') || ' ' || next_attempt_at || ' ' || updated_at, '|' ORDER BY id), '') FROM delivery`).Scan(&s))
	return s
}

// failures writes 3 deliveries FAILED after a transient error, 2 FAILED permanently and one
// EXPIRED, and returns their ids by kind.
func (e *env) failures() (transient, permanent, expired []string) {
	e.t.Helper()
	s := deliverytest.Spec{ClientID: e.clientID}
	transient = deliverytest.Failed(e.t, e.pool, 3, s, delivery.Outcome{Provider: "sms:twilio", ProviderCode: "503"})
	permanent = deliverytest.Failed(e.t, e.pool, 2, s, delivery.Outcome{AttemptClass: "PERMANENT", Provider: "sms:twilio", ProviderCode: "21211"})
	expired = deliverytest.Expired(e.t, e.pool, 1, s)
	return transient, permanent, expired
}

func (e *env) redriveCount() int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM redrive`).Scan(&n))
	return n
}

// TestRedriveDryRunChangesNothing: a dry run answers the count and what would be skipped,
// is DONE at once and leaves every delivery exactly as it was, even with an executor
// running.
func TestRedriveDryRunChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.failures()
	e.runRedrives()
	before := e.deliveryStates()
	res := e.postRedrive("dry", `{"filter": {"status": ["FAILED"]}, "dryRun": true}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	ans := res.json(t)
	require.Equal(t, "DONE", ans["status"])
	require.Equal(t, true, ans["dryRun"])
	require.Equal(t, float64(5), ans["matched"])
	require.Equal(t, float64(0), ans["redriven"])
	require.Equal(t, map[string]any{"permanent": float64(2)}, ans["skipped"])
	got := e.redrive(ans["id"].(string))
	require.Equal(t, ans["matched"], got["matched"])
	require.Equal(t, e.clientID, got["clientId"], "the audit names who asked")
	require.Equal(t, before, e.deliveryStates(), "a dry run changes no delivery")
	// A real re-drive that re-arms nothing (its matches are all permanent) is taken and ended
	// by the executor: by then a dry run taken for a real one would have been executed first
	// (the executor takes the re-drive waiting longest).
	res = e.postRedrive("real", `{"filter": {"status": ["FAILED"], "errorCode": "21211"}}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	real := e.waitRedrive(res.json(t)["id"].(string))
	require.Equal(t, map[string]any{"permanent": float64(2)}, real["skipped"])
	require.Equal(t, before, e.deliveryStates(), "a dry run changes no delivery, executed or not")
}

// TestRedriveSkipsPermanent: a re-drive re-arms the transient failures and skips the
// permanent ones, counted under "permanent"; a second one with includePermanent re-arms
// those. Re-armed rows keep their attempts and name the re-drive.
func TestRedriveSkipsPermanent(t *testing.T) {
	e := newEnv(t)
	transient, permanent, _ := e.failures()
	e.runRedrives()
	res := e.postRedrive("first", `{"filter": {"status": ["FAILED"], "channel": "SMS"}}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	id := res.json(t)["id"].(string)
	require.Equal(t, "RUNNING", res.json(t)["status"])
	r := e.waitRedrive(id)
	require.Equal(t, float64(5), r["matched"])
	require.Equal(t, float64(3), r["redriven"])
	require.Equal(t, map[string]any{"permanent": float64(2)}, r["skipped"])
	require.NotEmpty(t, r["finishedAt"])
	state := func(ids []string) map[string]int {
		rows, err := e.pool.Query(context.Background(), `SELECT status || ' ' || coalesce(redrive_id::text, '-') || ' ' || attempts_at_redrive
			FROM delivery WHERE id = ANY($1::uuid[])`, ids)
		require.NoError(t, err)
		out := map[string]int{}
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out[s]++
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, map[string]int{"PENDING " + id + " 1": 3}, state(transient))
	require.Equal(t, map[string]int{"FAILED - 0": 2}, state(permanent))

	res = e.postRedrive("second", `{"filter": {"status": ["FAILED"]}, "includePermanent": true}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	second := res.json(t)["id"].(string)
	r = e.waitRedrive(second)
	require.Equal(t, float64(2), r["matched"], "the re-armed ones are no longer FAILED")
	require.Equal(t, float64(2), r["redriven"])
	require.Equal(t, map[string]int{"PENDING " + second + " 1": 2}, state(permanent))
}

// TestRedriveExpired: EXPIRED deliveries need a new expiresAt (422 without); with one they
// are re-armed with it.
func TestRedriveExpired(t *testing.T) {
	e := newEnv(t)
	_, _, expired := e.failures()
	e.runRedrives()
	requireProblem(t, e.postRedrive("no-expiry", `{"filter": {"status": ["EXPIRED"]}}`), http.StatusUnprocessableEntity, codeExpiresAtRequired)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	res := e.postRedrive("expiry", `{"filter": {"status": ["EXPIRED"]}, "expiresAt": "`+at.Format(time.RFC3339)+`"}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	r := e.waitRedrive(res.json(t)["id"].(string))
	require.Equal(t, float64(1), r["redriven"])
	var status herald.Status
	var expires time.Time
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT status, expires_at FROM delivery WHERE id = $1`, expired[0]).Scan(&status, &expires))
	require.Equal(t, herald.StatusPending, status)
	require.True(t, at.Equal(expires))
}

// TestRedriveIdempotency: the same key and body answer the first re-drive again (one row);
// the same key with another body is 422 idempotency_key_reused; the key is required.
func TestRedriveIdempotency(t *testing.T) {
	e := newEnv(t)
	e.failures()
	body := `{"filter": {"status": ["FAILED"]}, "dryRun": true}`
	first := e.postRedrive("k", body)
	require.Equal(t, http.StatusAccepted, first.status, "%s", first.body)
	// Member order and white space do not make another request.
	again := e.postRedrive("k", `{"dryRun": true,   "filter": {"status": ["FAILED", "FAILED"]}}`)
	require.Equal(t, http.StatusAccepted, again.status, "%s", again.body)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.json(t), again.json(t))
	requireProblem(t, e.postRedrive("k", `{"filter": {"status": ["FAILED"]}, "dryRun": false}`), http.StatusUnprocessableEntity, codeIdempotencyKeyReused)
	requireProblem(t, e.postRedrive("", body), http.StatusBadRequest, codeValidationFailed)
	require.Equal(t, 1, e.redriveCount())
}

// TestRedriveNeedsOperator: a send-only key (and any key without operator) gets 403
// insufficient_scope, and nothing is written.
func TestRedriveNeedsOperator(t *testing.T) {
	e := newEnv(t)
	e.failures()
	before := e.deliveryStates()
	for _, key := range []string{e.newKey(apikey.ScopeNotificationsSend), e.newKey(apikey.ScopeNotificationsSend, apikey.ScopeNotificationsRead, apikey.ScopeCampaignsWrite)} {
		res := e.postRedrive("k", `{"filter": {"status": ["FAILED"]}}`, map[string]string{"Authorization": "Bearer " + key})
		requireProblem(t, res, http.StatusForbidden, codeInsufficientScope)
		res = e.do(http.MethodGet, "/api/redrives/0190b7d4-0000-7000-8000-000000000000", nil, map[string]string{"Authorization": "Bearer " + key})
		requireProblem(t, res, http.StatusForbidden, codeInsufficientScope)
	}
	require.Zero(t, e.redriveCount())
	require.Equal(t, before, e.deliveryStates())
}

// TestRedriveBadInput: every refused request writes nothing.
func TestRedriveBadInput(t *testing.T) {
	e := newEnvWith(t, Config{RedriveMax: 4}, zaptest.NewLogger(t))
	e.failures()
	before := e.deliveryStates()
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		field      string // the field named, if any
		detail     string // in the detail, if any
	}{
		{"no status, no time range", `{"filter": {"channel": "SMS"}}`, 422, codeRedriveUnbounded, "", ""},
		{"no filter", `{}`, 422, codeRedriveUnbounded, "", ""},
		{"more than --redrive-max", `{"filter": {"status": ["FAILED"]}, "includePermanent": true}`, 422, codeRedriveTooLarge, "", "matches 5 deliveries"},
		{"UNDELIVERED", `{"filter": {"status": ["UNDELIVERED"]}}`, 422, codeStatusNotSupported, "", ""},
		{"EXPIRED without expiresAt", `{"filter": {"status": ["FAILED", "EXPIRED"]}}`, 422, codeExpiresAtRequired, "", ""},
		{"expiresAt in the past", `{"filter": {"status": ["EXPIRED"]}, "expiresAt": "2020-01-01T00:00:00Z"}`, 400, codeValidationFailed, "expiresAt", ""},
		{"unknown field", `{"filter": {"status": ["FAILED"]}, "force": true}`, 400, codeUnknownField, "force", ""},
		{"unknown filter field", `{"filter": {"status": ["FAILED"], "user": 5}}`, 400, codeUnknownField, "user", ""},
		{"bad status", `{"filter": {"status": ["SENT"]}}`, 400, codeValidationFailed, "filter.status[0]", ""},
		{"bad channel", `{"filter": {"status": ["FAILED"], "channel": "FAX"}}`, 400, codeValidationFailed, "filter.channel", ""},
		{"bad error class", `{"filter": {"status": ["FAILED"], "errorClass": "FATAL"}}`, 400, codeValidationFailed, "filter.errorClass", ""},
		{"bad campaign id", `{"filter": {"status": ["FAILED"], "campaignId": "7"}}`, 400, codeValidationFailed, "filter.campaignId", ""},
		{"bad time", `{"filter": {"from": "yesterday"}}`, 400, codeValidationFailed, "filter.from", ""},
		{"to before from", `{"filter": {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}}`, 400, codeValidationFailed, "filter.to", ""},
		{"status not an array", `{"filter": {"status": "FAILED"}}`, 400, codeValidationFailed, "filter.status", ""},
		{"not JSON", `{"filter": `, 400, codeMalformedJSON, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := requireProblem(t, e.postRedrive("bad-"+tc.name, tc.body), tc.status, tc.code)
			if tc.field != "" {
				require.Contains(t, fields(p), tc.field)
			}
			if tc.detail != "" {
				require.Contains(t, p["detail"], tc.detail)
			}
		})
	}
	require.Zero(t, e.redriveCount(), "a refused request writes no re-drive")
	require.Equal(t, before, e.deliveryStates(), "and changes no delivery")
	// Bounded by time alone, the same filter is accepted.
	res := e.postRedrive("time", `{"filter": {"from": "2020-01-01T00:00:00Z", "errorCode": "503"}, "dryRun": true, "expiresAt": "`+
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	require.Equal(t, float64(3), res.json(t)["matched"])
	requireProblem(t, e.do(http.MethodGet, "/api/redrives/nope", nil, nil), http.StatusNotFound, codeNotFound)
	require.True(t, strings.HasPrefix(res.header.Get("Location"), "/api/redrives/"))
}
