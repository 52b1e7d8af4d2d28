package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Brokers: []string{"b:9092"}}.withDefaults()
	require.NoError(t, c.validate())
	require.Equal(t, 12, c.Lanes[herald.PriorityHigh].Concurrency)
	require.Equal(t, 6, c.Lanes[herald.PriorityNormal].Concurrency)
	require.Equal(t, 2, c.Lanes[herald.PriorityLow].Concurrency)
	require.Equal(t, "notifications.low", c.Lanes[herald.PriorityLow].Topic)
	require.True(t, *c.Lanes[herald.PriorityHigh].RetryAmbiguous)
	require.False(t, *c.Lanes[herald.PriorityLow].RetryAmbiguous)
	require.Equal(t, 0.6, c.RateShares[herald.PriorityLow])
	require.Equal(t, DefaultRetryPolicy, c.RetryPolicies[herald.ChannelSMS])
	require.Equal(t, herald.Priorities, c.Run, "every lane runs by default")

	// A lane's own settings survive; what it leaves out is filled in.
	c = Config{Brokers: []string{"b"}, Lanes: map[herald.Priority]LaneConfig{herald.PriorityLow: {Concurrency: 9}}}.withDefaults()
	require.Equal(t, 9, c.Lanes[herald.PriorityLow].Concurrency)
	require.Equal(t, 10*time.Second, c.Lanes[herald.PriorityLow].RateWait)
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }},
		{"share above 1", func(c *Config) { c.RateShares[herald.PriorityLow] = 1.5 }},
		{"zero share", func(c *Config) { c.RateShares[herald.PriorityNormal] = -0.1 }},
		{"limit below 1", func(c *Config) { c.RateLimits = map[string]int{"sms:x": 0} }},
		{"send timeout past the reaper's lease", func(c *Config) { c.SendTimeout = 5 * time.Minute }},
		{"rate wait plus send timeout past the lease", func(c *Config) {
			l := c.Lanes[herald.PriorityLow]
			l.RateWait = 2 * time.Minute
			c.Lanes[herald.PriorityLow] = l
			c.SendTimeout = 4 * time.Minute
		}},
		{"retry max below base", func(c *Config) {
			c.RetryPolicies[herald.ChannelSMS] = RetryPolicy{Base: time.Minute, Max: time.Second, MaxAttempts: 3}
		}},
		{"degraded processes", func(c *Config) { c.DegradedProcesses = -1 }},
		{"a lane to run that is no priority", func(c *Config) { c.Run = []herald.Priority{herald.PriorityHigh, "URGENT"} }},
		{"a lane to run named twice", func(c *Config) { c.Run = []herald.Priority{herald.PriorityLow, herald.PriorityLow} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Brokers: []string{"b"}}.withDefaults()
			tc.mod(&c)
			require.Error(t, c.validate())
		})
	}
}
