package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestEventsFlags: --events-topic and --events-partitions reach the relay (defaults
// herald.DefaultEventsTopic and 6), and --events=false gives the process's sessions
// herald.events = off, which the outbox triggers read.
func TestEventsFlags(t *testing.T) {
	c := serveFlags(t)
	require.NoError(t, c.validate())
	require.Equal(t, herald.DefaultEventsTopic, c.Relay.cfg.EventsTopic)
	require.EqualValues(t, 6, c.Relay.cfg.EventsPartitions)
	require.Empty(t, c.sessionSettings)

	c = serveFlags(t, "--events-topic", "ev", "--events-partitions", "3", "--events=false")
	require.NoError(t, c.validate())
	require.Equal(t, "ev", c.Relay.cfg.EventsTopic)
	require.EqualValues(t, 3, c.Relay.cfg.EventsPartitions)
	c.DatabaseURL = stacktest.PostgresURL(t)
	pool, err := openPool(context.Background(), c.commonConfig, "herald")
	require.NoError(t, err)
	defer pool.Close()
	var on bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT herald_event_enabled()`).Scan(&on))
	require.False(t, on, "the sessions of --events=false write no events")

	c = serveFlags(t, "--events-partitions", "0")
	require.ErrorContains(t, c.validate(), "--events-partitions")
}
