package ingest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestQuietWindowEnd(t *testing.T) {
	night := quietHours{start: 22 * 60, end: 7 * 60}
	cases := []struct {
		name string
		zone string
		q    quietHours
		at   string // instant
		in   bool
		end  string // instant, when in
	}{
		{name: "before the window", zone: "Europe/Berlin", q: night, at: "2026-06-10T21:59:00+02:00"},
		{name: "at the start", zone: "Europe/Berlin", q: night, at: "2026-06-10T22:00:00+02:00", in: true, end: "2026-06-11T07:00:00+02:00"},
		{name: "after midnight", zone: "Europe/Berlin", q: night, at: "2026-06-11T03:00:00+02:00", in: true, end: "2026-06-11T07:00:00+02:00"},
		{name: "at the end", zone: "Europe/Berlin", q: night, at: "2026-06-11T07:00:00+02:00"},
		{name: "midday", zone: "Europe/Berlin", q: night, at: "2026-06-11T12:00:00+02:00"},
		{name: "daytime window", zone: "Asia/Tokyo", q: quietHours{start: 13 * 60, end: 15*60 + 30}, at: "2026-06-11T14:00:00+09:00", in: true, end: "2026-06-11T15:30:00+09:00"},
		{name: "daytime window, outside", zone: "Asia/Tokyo", q: quietHours{start: 13 * 60, end: 15*60 + 30}, at: "2026-06-11T12:59:00+09:00"},
		{name: "user zone, not UTC", zone: "America/Los_Angeles", q: night, at: "2026-06-11T05:30:00Z", in: true, end: "2026-06-11T07:00:00-07:00"},
		// New York springs forward on 2026-03-08 at 02:00 EST → 03:00 EDT: the night lasts
		// 8 wall-clock hours but 7 real ones, and ends at 07:00 EDT (11:00Z), not 12:00Z.
		{name: "spring forward", zone: "America/New_York", q: night, at: "2026-03-07T23:00:00-05:00", in: true, end: "2026-03-08T07:00:00-04:00"},
		{name: "spring forward, after the gap", zone: "America/New_York", q: night, at: "2026-03-08T03:30:00-04:00", in: true, end: "2026-03-08T07:00:00-04:00"},
		// New York falls back on 2026-11-01 at 02:00 EDT → 01:00 EST: 9 real hours.
		{name: "fall back", zone: "America/New_York", q: night, at: "2026-10-31T23:00:00-04:00", in: true, end: "2026-11-01T07:00:00-05:00"},
		{name: "fall back, repeated hour", zone: "America/New_York", q: night, at: "2026-11-01T01:30:00-05:00", in: true, end: "2026-11-01T07:00:00-05:00"},
		// Berlin springs forward on 2026-03-29 at 02:00 CET → 03:00 CEST, inside a 01:00–04:00 window.
		{name: "window around the gap", zone: "Europe/Berlin", q: quietHours{start: 60, end: 4 * 60}, at: "2026-03-29T01:30:00+01:00", in: true, end: "2026-03-29T04:00:00+02:00"},
		{name: "window around the gap, after", zone: "Europe/Berlin", q: quietHours{start: 60, end: 4 * 60}, at: "2026-03-29T04:00:00+02:00"},
		// Sydney ends DST on 2026-04-05 at 03:00 AEDT → 02:00 AEST.
		{name: "southern hemisphere fall back", zone: "Australia/Sydney", q: night, at: "2026-04-04T23:00:00+11:00", in: true, end: "2026-04-05T07:00:00+10:00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			end, in := quietWindowEnd(utc(tc.at), mustLoc(t, tc.zone), tc.q)
			require.Equal(t, tc.in, in)
			if tc.in {
				require.True(t, utc(tc.end).Equal(end), "end %s, want %s", end.UTC(), utc(tc.end))
			}
		})
	}
}

func TestFirstAttempt(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	night := &quietHours{start: 22 * 60, end: 7 * 60}
	now := utc("2026-06-10T21:00:00Z") // 23:00 in Berlin: quiet
	day := utc("2026-06-10T10:00:00Z") // 12:00 in Berlin
	ptr := func(s string) *time.Time { v := utc(s); return &v }

	require.Nil(t, firstAttempt(day, nil, herald.PriorityNormal, berlin, night), "due now: column default")
	require.Nil(t, firstAttempt(now, nil, herald.PriorityNormal, berlin, nil), "no quiet hours")
	require.Nil(t, firstAttempt(now, nil, herald.PriorityHigh, berlin, night), "HIGH bypasses quiet hours")
	require.Nil(t, firstAttempt(day, ptr("2026-06-10T09:00:00Z"), herald.PriorityLow, berlin, night), "sendAt in the past")
	require.Equal(t, ptr("2026-06-11T05:00:00Z"), firstAttempt(now, nil, herald.PriorityNormal, berlin, night))
	require.Equal(t, ptr("2026-06-11T05:00:00Z"), firstAttempt(now, nil, herald.PriorityLow, berlin, night))
	require.Equal(t, ptr("2026-06-10T12:00:00Z"), firstAttempt(day, ptr("2026-06-10T12:00:00Z"), herald.PriorityLow, berlin, night), "sendAt outside the window")
	require.Equal(t, ptr("2026-06-11T05:00:00Z"), firstAttempt(day, ptr("2026-06-10T23:00:00Z"), herald.PriorityLow, berlin, night), "sendAt inside the window")
	require.Equal(t, ptr("2026-06-10T23:00:00Z"), firstAttempt(day, ptr("2026-06-10T23:00:00Z"), herald.PriorityHigh, berlin, night), "HIGH keeps sendAt")
}
