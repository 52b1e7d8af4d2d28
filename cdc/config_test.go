package cdc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults("postgres://x")
	require.NoError(t, c.validate())
	require.Equal(t, "postgres://x", c.ConnString)
	require.Equal(t, "notifications.high", c.Topics[herald.PriorityHigh])
	require.Equal(t, int32(2), c.Partitions[herald.PriorityLow])
	require.Equal(t, DefaultSendingLease, c.SendingLease)
	require.Equal(t, 10*time.Second, c.StatusInterval)

	c = Config{Topics: map[herald.Priority]string{herald.PriorityLow: "bulk"}}.withDefaults("postgres://x")
	require.Equal(t, "bulk", c.Topics[herald.PriorityLow])
	require.Equal(t, "notifications.normal", c.Topics[herald.PriorityNormal])
}

func TestConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"slot with a quote":  {Config{Slot: "a'b"}, "slot name"},
		"upper-case pub":     {Config{Publication: "Pub"}, "publication name"},
		"shared topic":       {Config{Topics: map[herald.Priority]string{herald.PriorityHigh: "x", herald.PriorityLow: "x"}}, "used by"},
		"negative in flight": {Config{MaxInFlight: -1}, "MaxInFlight"},
		"negative lease":     {Config{QueuedLease: map[herald.Priority]time.Duration{herald.PriorityLow: -time.Second}}, "QUEUED lease of LOW"},
		"status too rare":    {Config{StatusInterval: time.Minute}, "at most 10s"},
		"negative grace":     {Config{GracePeriod: -time.Second}, "GracePeriod"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.withDefaults("postgres://x").validate()
			require.ErrorContains(t, err, tc.want)
		})
	}
}
