package openapitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// check runs one exchange: a request to path with body, answered with status, content type
// and answer.
func check(t *testing.T, method, path, body string, status int, contentType, answer string, header ...string) error {
	t.Helper()
	v, err := Shared()
	require.NoError(t, err)
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer hk_test")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return v.Check(context.Background(), Exchange{Request: req, RequestBody: []byte(body), Status: status, Header: h, Body: []byte(answer)})
}

const (
	problemJSON = "application/problem+json"
	okTemplate  = `{"name":"otp","category":"auth","channels":["SMS"],"content":{"SMS":{"default":{"text":"{{.code}}"}}},"updatedAt":"2026-12-01T10:00:00Z"}`
)

func problem(code string, status int) string {
	return `{"type":"urn:herald:problem:` + code + `","title":"t","status":` + strconv.Itoa(status) + `,"code":"` + code + `"}`
}

// The checks pass what the handlers answer, and fail each kind of drift.
func TestCheck(t *testing.T) {
	// What the handlers do.
	require.NoError(t, check(t, http.MethodGet, "/healthz", "", 200, "application/json", `{"status":"ok"}`))
	require.NoError(t, check(t, http.MethodGet, "/api/templates/otp", "", 200, "application/json", okTemplate))
	require.NoError(t, check(t, http.MethodGet, "/api/templates/otp", "", 404, problemJSON, problem("not_found", 404)))
	require.NoError(t, check(t, http.MethodPut, "/api/templates/otp", `{"category":"auth","channels":["SMS"],"nope":1}`,
		400, problemJSON, problem("unknown_field", 400)), "an invalid request refused")
	require.NoError(t, check(t, http.MethodGet, "/api/nothing", "", 404, problemJSON, problem("not_found", 404)))
	require.NoError(t, check(t, http.MethodDelete, "/api/templates/otp", "", 405, problemJSON, problem("method_not_allowed", 405)))

	for name, err := range map[string]error{
		"a member the answer schema does not list": check(t, http.MethodGet, "/healthz", "", 200, "application/json", `{"status":"ok","extra":1}`),
		"a value outside the answer's enum":        check(t, http.MethodGet, "/healthz", "", 200, "application/json", `{"status":"okay"}`),
		"a required member missing":                check(t, http.MethodGet, "/api/templates/otp", "", 200, "application/json", `{"name":"otp"}`),
		"a status the operation does not list":     check(t, http.MethodGet, "/api/templates/otp", "", 409, problemJSON, problem("campaign_conflict", 409)),
		"a problem code the status does not list":  check(t, http.MethodGet, "/api/templates/otp", "", 404, problemJSON, problem("unknown_template", 404)),
		"a required header missing": check(t, http.MethodPost, "/api/notifications", `{"userId":1,"template":"otp","channels":["SMS"]}`,
			202, "application/json", `{"id":"01a229cf-44c9-7dc8-910f-23f85bba1e50","deliveries":[],"suppressed":[]}`, "Idempotency-Key", "k"),
		"an invalid request accepted": check(t, http.MethodPut, "/api/templates/otp", `{"category":"auth","channels":["SMS"],"nope":1}`,
			200, "application/json", okTemplate),
		"a valid request refused as an unknown field": check(t, http.MethodPut, "/api/templates/otp", `{"category":"auth","channels":["SMS"]}`,
			400, problemJSON, problem("unknown_field", 400)),
		"an undescribed path answered": check(t, http.MethodGet, "/api/nothing", "", 200, "application/json", `{}`),
		"a 404 that is no problem":     check(t, http.MethodGet, "/api/nothing", "", 404, "text/plain", `404 page not found`),
	} {
		require.Error(t, err, name)
		t.Logf("%s: %v", name, err)
	}
}
