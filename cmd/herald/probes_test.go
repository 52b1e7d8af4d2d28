package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A process without the ingest role serves the probes as an ingest process does (readiness
// includes the migration state, answered in JSON), and nothing else of the API.
func TestProbesWithoutIngestRole(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	sm := startSim(t)
	addr := freeAddr(t)
	key := st.apiKey(t)
	st.serve(t, "relay-dispatch", addr, sm, "--roles", "relay,dispatch")

	var ready, live struct{ Status string }
	doJSON(t, http.MethodGet, "http://"+addr+"/readyz", "", "", &ready, http.StatusOK)
	require.Equal(t, "ready", ready.Status)
	doJSON(t, http.MethodGet, "http://"+addr+"/healthz", "", "", &live, http.StatusOK)
	require.Equal(t, "ok", live.Status)

	require.Equal(t, http.StatusNotFound, doJSON(t, http.MethodGet, "http://"+addr+"/api/templates/otp", key, "", nil))
}
