package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
)

// A process without the ingest role serves the probes as an ingest process does (readiness
// includes the migration state, answered in JSON), and nothing else of the API.
func TestProbesWithoutIngestRole(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	sm := startSim(t)
	addr := heraldtest.FreeAddr(t)
	key := st.apiKey(t)
	st.serve(t, "relay-dispatch", addr, sm, "--roles", "relay,dispatch")

	var ready, live struct{ Status string }
	doJSON(t, http.MethodGet, "http://"+addr+"/readyz", "", "", &ready, http.StatusOK)
	require.Equal(t, "ready", ready.Status)
	doJSON(t, http.MethodGet, "http://"+addr+"/healthz", "", "", &live, http.StatusOK)
	require.Equal(t, "ok", live.Status)

	require.Equal(t, http.StatusNotFound, doJSON(t, http.MethodGet, "http://"+addr+"/api/templates/otp", key, "", nil))
}

// The API listener serves no metrics; the admin listener serves them (Prometheus text),
// pprof and the probes.
func TestAdminListener(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	sm := startSim(t)
	addr, admin := heraldtest.FreeAddr(t), heraldtest.FreeAddr(t)
	st.serve(t, "serve", addr, sm, "--admin-addr", admin)

	require.Equal(t, http.StatusNotFound, doJSON(t, http.MethodGet, "http://"+addr+"/metrics", "", "", nil))
	require.Equal(t, http.StatusNotFound, doJSON(t, http.MethodGet, "http://"+addr+"/debug/pprof/", "", "", nil))

	status, body, err := tryJSON(context.Background(), http.MethodGet, "http://"+admin+"/metrics", "", "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), "# TYPE go_goroutines gauge")
	require.Contains(t, string(body), "http_server_request")
	require.Equal(t, http.StatusOK, doJSON(t, http.MethodGet, "http://"+admin+"/debug/pprof/", "", "", nil))
	var ready struct{ Status string }
	doJSON(t, http.MethodGet, "http://"+admin+"/readyz", "", "", &ready, http.StatusOK)
	require.Equal(t, "ready", ready.Status)
	require.Equal(t, http.StatusNotFound, doJSON(t, http.MethodGet, "http://"+admin+"/api/templates/otp", "", "", nil))
}
