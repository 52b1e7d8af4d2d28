package dispatch

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestRetryPolicyCeiling(t *testing.T) {
	p := DefaultRetryPolicy
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		require.Equal(t, w, p.ceiling(i+1), "attempt %d", i+1)
	}
	require.Equal(t, 5*time.Minute, p.ceiling(400), "no overflow on large attempt numbers")
}

func TestRetryPolicyDelayFullJitter(t *testing.T) {
	p := RetryPolicy{Base: 2 * time.Second, Max: 5 * time.Minute, MaxAttempts: 6}
	require.Equal(t, time.Duration(0), p.delay(1, 0, func() float64 { return 0 }))
	require.Equal(t, time.Second, p.delay(1, 0, func() float64 { return 0.5 }))
	require.Equal(t, 3*time.Second+999*time.Millisecond+999*time.Microsecond+996*time.Nanosecond,
		p.delay(2, 0, func() float64 { return 0.999999999 }), "sub-second precision")
	// Retry-After wins when longer than the jittered delay, even past Max.
	require.Equal(t, 10*time.Minute, p.delay(1, 10*time.Minute, func() float64 { return 0.9 }))
	require.Equal(t, 3*time.Second, p.delay(2, time.Second, func() float64 { return 0.75 }))
}

// A Retry-After far in the future (999999999 s, about 31 years) is capped at MaxRetryAfter,
// 1 h by default; one under the cap is honoured as it is.
func TestRetryPolicyDelayCapsRetryAfter(t *testing.T) {
	huge := 999999999 * time.Second
	half := func() float64 { return 0.5 }
	require.Equal(t, time.Hour, DefaultRetryPolicy.delay(1, huge, half))
	require.Equal(t, time.Hour, RetryPolicy{Base: 2 * time.Second, Max: 5 * time.Minute, MaxAttempts: 6}.delay(1, huge, half),
		"a policy without a cap gets the default one")
	custom := RetryPolicy{Base: 2 * time.Second, Max: 5 * time.Minute, MaxAttempts: 6, MaxRetryAfter: 10 * time.Minute}
	require.Equal(t, 10*time.Minute, custom.delay(3, huge, half))
	require.Equal(t, 7*time.Minute, custom.delay(3, 7*time.Minute, half), "a Retry-After under the cap wins over jitter")
	require.Equal(t, 4*time.Second, custom.delay(3, time.Second, half), "the jittered delay when longer")

	cfg := Config{RetryPolicies: map[herald.Channel]RetryPolicy{herald.ChannelSMS: {Base: time.Second, Max: time.Minute, MaxAttempts: 2}}}.withDefaults()
	require.Equal(t, time.Hour, cfg.RetryPolicies[herald.ChannelSMS].MaxRetryAfter, "filled in with the defaults")
	cfg.RetryPolicies[herald.ChannelSMS] = RetryPolicy{Base: time.Second, Max: time.Minute, MaxAttempts: 2, MaxRetryAfter: -time.Second}
	cfg.Brokers = []string{"localhost:9092"}
	require.Error(t, cfg.validate())
}

func TestQuietEnd(t *testing.T) {
	clock := func(h, m int) pgtype.Time {
		return pgtype.Time{Microseconds: int64(h)*3600e6 + int64(m)*60e6, Valid: true}
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	cases := []struct {
		name       string
		at         time.Time
		tz         string
		start, end pgtype.Time
		want       time.Time
		quiet      bool
	}{
		{"no quiet hours", time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC), "UTC", pgtype.Time{}, pgtype.Time{}, time.Time{}, false},
		{"overnight, before midnight", time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC), "UTC", clock(22, 0), clock(7, 0),
			time.Date(2026, 1, 2, 7, 0, 0, 0, time.UTC), true},
		{"overnight, after midnight", time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), "UTC", clock(22, 0), clock(7, 0),
			time.Date(2026, 1, 2, 7, 0, 0, 0, time.UTC), true},
		{"overnight, outside", time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC), "UTC", clock(22, 0), clock(7, 0), time.Time{}, false},
		{"same day window", time.Date(2026, 1, 2, 13, 30, 0, 0, time.UTC), "UTC", clock(13, 0), clock(14, 0),
			time.Date(2026, 1, 2, 14, 0, 0, 0, time.UTC), true},
		{"end is exclusive", time.Date(2026, 1, 2, 14, 0, 0, 0, time.UTC), "UTC", clock(13, 0), clock(14, 0), time.Time{}, false},
		{"user's zone", time.Date(2026, 1, 1, 22, 30, 0, 0, time.UTC), "Europe/Berlin", clock(22, 0), clock(7, 0),
			time.Date(2026, 1, 2, 7, 0, 0, 0, berlin), true},
		{"unknown zone is UTC", time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC), "Mars/Olympus", clock(22, 0), clock(7, 0),
			time.Date(2026, 1, 2, 7, 0, 0, 0, time.UTC), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, quiet := quietEnd(c.at, c.tz, c.start, c.end)
			require.Equal(t, c.quiet, quiet)
			if quiet {
				require.True(t, c.want.Equal(got), "want %v, got %v", c.want, got)
			}
		})
	}
}
