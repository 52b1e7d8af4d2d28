package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestFirstAttempt(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	night := &QuietHours{Start: 22 * time.Hour, End: 7 * time.Hour}
	now := instant("2026-06-10T21:00:00Z") // 23:00 in Berlin: quiet
	day := instant("2026-06-10T10:00:00Z") // 12:00 in Berlin
	ptr := func(s string) *time.Time { v := instant(s); return &v }

	require.Nil(t, FirstAttempt(day, nil, herald.PriorityNormal, berlin, night), "due now: column default")
	require.Nil(t, FirstAttempt(now, nil, herald.PriorityNormal, berlin, nil), "no quiet hours")
	require.Nil(t, FirstAttempt(now, nil, herald.PriorityHigh, berlin, night), "HIGH bypasses quiet hours")
	require.Nil(t, FirstAttempt(day, ptr("2026-06-10T09:00:00Z"), herald.PriorityLow, berlin, night), "sendAt in the past")
	require.Equal(t, ptr("2026-06-11T05:00:00Z"), FirstAttempt(now, nil, herald.PriorityNormal, berlin, night))
	require.Equal(t, ptr("2026-06-11T05:00:00Z"), FirstAttempt(now, nil, herald.PriorityLow, berlin, night))
	require.Equal(t, ptr("2026-06-10T12:00:00Z"), FirstAttempt(day, ptr("2026-06-10T12:00:00Z"), herald.PriorityLow, berlin, night), "sendAt outside the window")
	require.Equal(t, ptr("2026-06-11T05:00:00Z"), FirstAttempt(day, ptr("2026-06-10T23:00:00Z"), herald.PriorityLow, berlin, night), "sendAt inside the window")
	require.Equal(t, ptr("2026-06-10T23:00:00Z"), FirstAttempt(day, ptr("2026-06-10T23:00:00Z"), herald.PriorityHigh, berlin, night), "HIGH keeps sendAt")
}

// A first attempt and a retry that land on the same instant wait for the same end: before,
// ingest and dispatch each had a rule of their own and disagreed at DST changes.
func TestFirstAttemptAndRetryAgree(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	q := &QuietHours{Start: 23 * time.Hour, End: 2*time.Hour + 30*time.Minute}
	at := instant("2025-03-30T01:59:00+01:00")
	first := FirstAttempt(at, nil, herald.PriorityNormal, berlin, q)
	require.NotNil(t, first)
	require.Equal(t, instant("2025-03-30T03:00:00+02:00"), *first)
	before := at.Add(-time.Minute)
	require.Equal(t, first.Sub(before), RetryDelay(before, time.Minute, herald.PriorityNormal, berlin, q))

	require.Equal(t, time.Minute, RetryDelay(before, time.Minute, herald.PriorityHigh, berlin, q), "HIGH ignores quiet hours")
	require.Equal(t, time.Minute, RetryDelay(before, time.Minute, herald.PriorityLow, berlin, nil), "no quiet hours")
	require.Equal(t, 3*time.Hour, RetryDelay(instant("2026-06-10T10:00:00Z"), 3*time.Hour, herald.PriorityLow, berlin, q), "outside the window")
}
