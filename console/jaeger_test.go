package console_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeJaeger is Jaeger's query API holding one trace: traceID, from
// testdata/jaeger_trace.json (seven spans of herald's services, listed out of order, with
// tags the trace view must hide). Any other trace is Jaeger's 404.
type fakeJaeger struct {
	srv   *httptest.Server
	calls atomic.Int64 // requests received
}

func newFakeJaeger(t *testing.T) *fakeJaeger {
	t.Helper()
	body, err := os.ReadFile("testdata/jaeger_trace.json")
	require.NoError(t, err)
	j := &fakeJaeger{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/traces/{id}", func(w http.ResponseWriter, r *http.Request) {
		j.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.PathValue("id") != traceID {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":404,"msg":"trace not found"}]}`))
			return
		}
		_, _ = w.Write(body)
	})
	j.srv = httptest.NewServer(mux)
	t.Cleanup(j.srv.Close)
	return j
}
