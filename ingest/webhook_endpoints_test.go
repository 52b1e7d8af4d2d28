package ingest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/endpoint"
)

// disabledEndpoint creates an endpoint of the env's client, disabled as a 410 leaves it, and
// writes an event of the client's into the outbox; it returns the endpoint's id.
func (e *env) disabledEndpoint() string {
	e.t.Helper()
	ep, err := endpoint.Create(context.Background(), e.pool, e.clientID, "https://hooks.example.com/e", "", nil)
	require.NoError(e.t, err)
	_, err = endpoint.Disable(context.Background(), e.pool, ep.ID)
	require.NoError(e.t, err)
	e.outboxEvent(e.clientID, herald.EventSent)
	return ep.ID
}

// outboxEvent writes a delivery_event row of client, as a transition would.
func (e *env) outboxEvent(client string, t herald.EventType) string {
	e.t.Helper()
	id, d := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	_, err := e.pool.Exec(context.Background(), `INSERT INTO delivery_event (id, type, client_id, notification_id, delivery_id, occurred_at, data)
		VALUES ($1, $2, $3, $4, $4, now(), '{}')`, id, string(t), client, d)
	require.NoError(e.t, err)
	return id.String()
}

func TestWebhookEndpointLifecycle(t *testing.T) {
	e := newEnv(t)
	res := e.do(http.MethodPost, "/api/webhook-endpoints",
		`{"url":"https://hooks.example.com/e","eventTypes":["herald.delivery.failed","herald.delivery.failed","herald.delivery.sent"],"description":"ops"}`, nil)
	require.Equal(t, http.StatusCreated, res.status, "%s", res.body)
	created := res.json(t)
	id := created["id"].(string)
	require.Equal(t, "/api/webhook-endpoints/"+id, res.header.Get("Location"))
	require.Equal(t, []any{"herald.delivery.failed", "herald.delivery.sent"}, created["eventTypes"], "a repeat collapses")
	require.Equal(t, true, created["enabled"])

	res = e.do(http.MethodGet, "/api/webhook-endpoints", nil, nil)
	require.Equal(t, http.StatusOK, res.status)
	require.Len(t, res.json(t)["endpoints"], 1)
	res = e.do(http.MethodGet, "/api/webhook-endpoints/"+id, nil, nil)
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "ops", res.json(t)["description"])

	// Replay owes the endpoint the client's events of its filter since the time.
	e.outboxEvent(e.clientID, herald.EventSent)
	e.outboxEvent(e.clientID, herald.EventAttemptFailed)
	res = e.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/replay", map[string]string{"since": time.Now().Add(-time.Hour).Format(time.RFC3339)}, nil)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	require.Equal(t, float64(1), res.json(t)["replayed"])

	// The attempts log: one attempt recorded as the events role does.
	var m endpoint.Message
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT event_id::text, attempts FROM webhook_message WHERE endpoint_id = $1`, id).Scan(&m.EventID, &m.Attempts))
	m.EndpointID = id
	moved, err := endpoint.Gone(context.Background(), e.pool, m, endpoint.Outcome{StatusCode: 410, Error: "http status 410", Duration: time.Millisecond})
	require.NoError(t, err)
	require.True(t, moved)
	_, err = endpoint.Disable(context.Background(), e.pool, id)
	require.NoError(t, err)
	res = e.do(http.MethodGet, "/api/webhook-endpoints/"+id+"/attempts", nil, nil)
	require.Equal(t, http.StatusOK, res.status)
	var attempts struct{ Attempts []endpoint.Attempt }
	require.NoError(t, json.Unmarshal(res.body, &attempts))
	require.Len(t, attempts.Attempts, 1)
	require.Equal(t, endpoint.ResultGone, attempts.Attempts[0].Result)
	require.Equal(t, m.EventID, attempts.Attempts[0].EventID)

	res = e.do(http.MethodGet, "/api/webhook-endpoints/"+id, nil, nil)
	require.Equal(t, false, res.json(t)["enabled"])
	res = e.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/enable", nil, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Equal(t, true, res.json(t)["enabled"])

	res = e.do(http.MethodDelete, "/api/webhook-endpoints/"+id, nil, nil)
	require.Equal(t, http.StatusNoContent, res.status)
	requireProblem(t, e.do(http.MethodGet, "/api/webhook-endpoints/"+id, nil, nil), http.StatusNotFound, codeNotFound)
}

// Another client's endpoint does not exist for a client: 404 on every route, nothing
// changed, and its list is empty.
func TestWebhookEndpointsOfAnotherClient(t *testing.T) {
	e := newEnv(t)
	res := e.do(http.MethodPost, "/api/webhook-endpoints", `{"url":"https://hooks.example.com/e"}`, nil)
	require.Equal(t, http.StatusCreated, res.status)
	id := res.json(t)["id"].(string)
	other := e.newKey(apikey.ScopeWebhooksWrite, apikey.ScopeNotificationsRead)
	auth := map[string]string{"Authorization": "Bearer " + other}
	before := snapshot(t, e)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/webhook-endpoints/" + id, ""},
		{http.MethodGet, "/api/webhook-endpoints/" + id + "/attempts", ""},
		{http.MethodDelete, "/api/webhook-endpoints/" + id, ""},
		{http.MethodPost, "/api/webhook-endpoints/" + id + "/enable", ""},
		{http.MethodPost, "/api/webhook-endpoints/" + id + "/replay", `{"since":"2020-01-01T00:00:00Z"}`},
		{http.MethodGet, "/api/webhook-endpoints/not-a-uuid", ""},
	} {
		requireProblem(t, e.do(c.method, c.path, nilIfEmpty(c.body), auth), http.StatusNotFound, codeNotFound)
	}
	require.Equal(t, before, snapshot(t, e))
	res = e.do(http.MethodGet, "/api/webhook-endpoints", nil, auth)
	require.Equal(t, http.StatusOK, res.status)
	require.Empty(t, res.json(t)["endpoints"])
}

func TestWebhookEndpointValidation(t *testing.T) {
	e := newEnv(t)
	before := snapshot(t, e)
	for _, c := range []struct{ body, field string }{
		{`{}`, "url"},
		{`{"url":"ftp://hooks.example.com"}`, "url"},
		{`{"url":"https://user:pw@hooks.example.com"}`, "url"},
		{`{"url":"/relative"}`, "url"},
		{`{"url":"https://hooks.example.com","eventTypes":["herald.delivery.nope"]}`, "eventTypes[0]"},
		{`{"url":"https://hooks.example.com","description":"` + longText(501) + `"}`, "description"},
	} {
		p := requireProblem(t, e.do(http.MethodPost, "/api/webhook-endpoints", c.body, nil), http.StatusBadRequest, codeValidationFailed)
		require.Equal(t, c.field, p["errors"].([]any)[0].(map[string]any)["field"], c.body)
	}
	requireProblem(t, e.do(http.MethodPost, "/api/webhook-endpoints", `{"url":"https://h.example.com","secret":"x"}`, nil), http.StatusBadRequest, codeUnknownField)
	requireProblem(t, e.do(http.MethodPost, "/api/webhook-endpoints", `{"url":`, nil), http.StatusBadRequest, codeMalformedJSON)
	require.Equal(t, before, snapshot(t, e), "nothing written")

	res := e.do(http.MethodPost, "/api/webhook-endpoints", `{"url":"https://hooks.example.com/e"}`, nil)
	id := res.json(t)["id"].(string)
	before = snapshot(t, e)
	for _, body := range []string{`{}`, `{"since":"yesterday"}`, `{"since":"` + time.Now().Add(time.Hour).Format(time.RFC3339) + `"}`} {
		p := requireProblem(t, e.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/replay", body, nil), http.StatusBadRequest, codeValidationFailed)
		require.Equal(t, "since", p["errors"].([]any)[0].(map[string]any)["field"], body)
	}
	requireProblem(t, e.do(http.MethodGet, "/api/webhook-endpoints/"+id+"/attempts?limit=0", nil, nil), http.StatusBadRequest, codeValidationFailed)
	require.Equal(t, before, snapshot(t, e), "nothing written")
}

func longText(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}
