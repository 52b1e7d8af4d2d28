package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/events"
)

// The events role is one of the default roles; its flags and their variables reach
// events.Config, with the schedule of the Standard Webhooks specification by default, and a
// bad schedule is refused before anything starts.
func TestServeEventsRoleFlags(t *testing.T) {
	parse := func(args ...string) (serveConfig, error) { return parseServe(t, args...) }
	c, err := parse()
	require.NoError(t, err)
	require.True(t, c.has("events"), "on by default, with dispatch")
	cfg, err := c.Endpoints.config(c)
	require.NoError(t, err)
	require.Equal(t, events.DefaultRetrySchedule, cfg.RetrySchedule)
	require.Equal(t, c.Events.Topic, cfg.Topic)

	t.Setenv("HERALD_EVENTS_RETRY_SCHEDULE", "0s,500ms,1s,2s")
	c, err = parse("--events-endpoint-concurrency", "2", "--webhook-allow-loopback")
	require.NoError(t, err)
	cfg, err = c.Endpoints.config(c)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second}, cfg.RetrySchedule)
	require.Equal(t, 2, cfg.EndpointConcurrency)
	require.True(t, cfg.AllowLoopback, "endpoint URLs follow the WEBHOOK channel's guard settings")

	_, err = parse("--events-retry-schedule", "0s,soon")
	require.ErrorContains(t, err, "--events-retry-schedule")
}
