package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/redrive"
	"github.com/heraldhq/herald/internal/stacktest"
)

// A component that fails to build stops serve before anything runs: no HTTP server or other
// component is left behind without an owner. (Not parallel: goleak looks at every goroutine.)
func TestServeBuildFailureLeavesNothingRunning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dsn := stacktest.PostgresURL(t)
	err := runServe(context.Background(), []string{
		"--database-url", dsn, "--roles", "dispatch", "--http-addr", heraldtest.FreeAddr(t),
		"--dispatch-concurrency-high", "-1", "--log-level", "error", // rejected by dispatch.New
	})
	require.ErrorContains(t, err, "concurrency")
}

// parseServe is `herald serve`'s configuration from args (and the HERALD_* variables), with
// the error of its validation.
func parseServe(t *testing.T, args ...string) (serveConfig, error) {
	t.Helper()
	var c serveConfig
	f := newFlags("serve")
	c.register(f)
	require.NoError(t, f.Parse(args))
	return c, c.validate()
}

// The reaper's SENDING lease must outlast a worker's hold on a row, or a second worker calls
// the provider while the first call is still in flight.
func TestServeRejectsSendingLeaseShorterThanSendHold(t *testing.T) {
	parse := func(args ...string) error {
		_, err := parseServe(t, args...)
		return err
	}
	require.NoError(t, parse())
	require.NoError(t, parse("--send-timeout", "4m", "--rate-limits", "sms:twilio=5"))
	require.NoError(t, parse("--relay-sending-lease", "10s", "--send-timeout", "4s")) // no limits: no rate wait
	require.ErrorContains(t, parse("--relay-sending-lease", "30s", "--send-timeout", "30s"), "--relay-sending-lease")
	// With limits, a LOW delivery may wait 10 s for capacity before its 30 s call.
	require.ErrorContains(t, parse("--relay-sending-lease", "40s", "--send-timeout", "30s", "--rate-limits", "sms:twilio=5"),
		"--relay-sending-lease")
	// The rest of the topology is checked in the same place (herald.Topology).
	require.ErrorContains(t, parse("--topic-low", "notifications.high"), `topic "notifications.high" used by HIGH and LOW`)
	require.ErrorContains(t, parse("--dispatch-group-normal", "herald-dispatch-high"), "used by HIGH and NORMAL")
	require.ErrorContains(t, parse("--relay-slot", "Bad-Slot"), "slot name")
}

// The admission flags and their variables reach ingest.Config; 0 leaves the default that
// ingest.New derives from the pool.
func TestServeAdmissionFlags(t *testing.T) {
	t.Setenv("HERALD_ADMISSION_HIGH_RESERVE", "3")
	var c serveConfig
	f := newFlags("serve")
	c.register(f)
	require.NoError(t, f.Parse([]string{"--admission-slots", "12", "--admission-wait", "250ms"}))
	require.Equal(t, 12, c.Ingest.AdmissionSlots)
	require.Equal(t, 3, c.Ingest.AdmissionHighReserve)
	require.Equal(t, 250*time.Millisecond, c.Ingest.AdmissionWait)

	c = serveConfig{}
	f = newFlags("serve")
	c.register(f)
	require.NoError(t, f.Parse(nil))
	require.Equal(t, ingest.Config{AuthCacheTTL: ingest.DefaultAuthCacheTTL, AdmissionHighReserve: 3,
		AdmissionWait: ingest.DefaultAdmissionWait, RedriveMax: redrive.DefaultMax}, c.Ingest)
}
