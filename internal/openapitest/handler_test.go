package openapitest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// failures is a testing.TB that records what Handler reports instead of failing the test.
type failures struct {
	testing.TB
	errors []string
}

func (f *failures) Helper() {}

func (f *failures) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

// healthz answers /healthz with body.
func healthz(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	})
}

// Handler fails its test on an answer that departs from the description, passes one that
// does not, and hands the answer on unchanged either way.
func TestHandlerFailsTheTestOnADeparture(t *testing.T) {
	for _, c := range []struct {
		body string
		fail bool
	}{{`{"status":"ok"}`, false}, {`{"status":"ok","uptime":3}`, true}} {
		f := &failures{TB: t}
		rec := httptest.NewRecorder()
		Handler(f, healthz(c.body)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		require.Equal(t, c.body, rec.Body.String())
		require.Equal(t, http.StatusOK, rec.Code)
		if !c.fail {
			require.Empty(t, f.errors, c.body)
			continue
		}
		require.Len(t, f.errors, 1, c.body)
		require.Contains(t, f.errors[0], "GET /healthz does not match docs/openapi.yaml")
	}
}

// Transport reports an answer of a described operation that departs, and lets a path the
// description has no operation for pass unchecked.
func TestTransportReportsADeparture(t *testing.T) {
	srv := httptest.NewServer(healthz(`{"status":"fine"}`))
	t.Cleanup(srv.Close)
	var reports []string
	c := &http.Client{Transport: Transport(http.DefaultTransport, func(msg string) { reports = append(reports, msg) })}
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, err := c.Get(srv.URL + path)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, `{"status":"fine"}`, string(b))
	}
	require.Len(t, reports, 1)
	require.True(t, strings.HasPrefix(reports[0], "openapitest: GET /healthz does not match"), reports[0])
}
