package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := Location(name)
	require.NoError(t, err)
	return loc
}

func instant(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// hm is a time of day "15:04".
func hm(s string) time.Duration {
	t, err := time.Parse("15:04", s)
	if err != nil {
		panic(err)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute
}

func window(start, end string) QuietHours { return QuietHours{Start: hm(start), End: hm(end)} }

type quietCase struct {
	name string
	zone string
	q    QuietHours
	at   string // instant, RFC 3339 with the local offset
	in   bool
	end  string // instant, when in
}

// The rule at DST changes: an edge is the first instant the user's clock reads its time of
// day or later, so an edge in a gap falls on the change (the end of the gap) and an edge in a
// fold is its first occurrence; a window never reopens in a repeated hour.
var dstCases = []quietCase{
	// Berlin springs forward on 2025-03-30 at 02:00 CET → 03:00 CEST. Before, ingest said
	// quiet until 03:30 here and dispatch said not quiet.
	{name: "Berlin gap, end in the gap", zone: "Europe/Berlin", q: window("23:00", "02:30"), at: "2025-03-30T01:59:00+01:00", in: true, end: "2025-03-30T03:00:00+02:00"},
	{name: "Berlin gap, end in the gap, at the change", zone: "Europe/Berlin", q: window("23:00", "02:30"), at: "2025-03-30T03:00:00+02:00"},
	{name: "Berlin gap, end in the gap, after", zone: "Europe/Berlin", q: window("23:00", "02:30"), at: "2025-03-30T03:25:00+02:00"},
	{name: "Berlin gap, end in the gap, from the start", zone: "Europe/Berlin", q: window("23:00", "02:30"), at: "2025-03-29T23:00:00+01:00", in: true, end: "2025-03-30T03:00:00+02:00"},
	{name: "Berlin gap, start in the gap, before", zone: "Europe/Berlin", q: window("02:30", "06:00"), at: "2025-03-30T01:59:00+01:00"},
	{name: "Berlin gap, start in the gap, at the change", zone: "Europe/Berlin", q: window("02:30", "06:00"), at: "2025-03-30T03:00:00+02:00", in: true, end: "2025-03-30T06:00:00+02:00"},
	{name: "Berlin gap, window inside the gap", zone: "Europe/Berlin", q: window("02:10", "02:40"), at: "2026-03-29T03:00:00+02:00"},
	{name: "Berlin gap, window inside the gap, before", zone: "Europe/Berlin", q: window("02:10", "02:40"), at: "2026-03-29T01:59:00+01:00"},
	{name: "Berlin gap, window around it", zone: "Europe/Berlin", q: window("01:00", "04:00"), at: "2026-03-29T01:30:00+01:00", in: true, end: "2026-03-29T04:00:00+02:00"},
	// Berlin falls back on 2025-10-26 at 03:00 CEST → 02:00 CET: 02:00–03:00 twice.
	{name: "Berlin fold, end in the fold", zone: "Europe/Berlin", q: window("23:00", "02:30"), at: "2025-10-26T02:15:00+02:00", in: true, end: "2025-10-26T02:30:00+02:00"},
	{name: "Berlin fold, end in the fold, after its first occurrence", zone: "Europe/Berlin", q: window("23:00", "02:30"), at: "2025-10-26T02:45:00+02:00"},
	{name: "Berlin fold, end in the fold, no reopening", zone: "Europe/Berlin", q: window("23:00", "02:30"), at: "2025-10-26T02:15:00+01:00"},
	{name: "Berlin fold, start in the fold", zone: "Europe/Berlin", q: window("02:30", "06:00"), at: "2025-10-26T02:30:00+02:00", in: true, end: "2025-10-26T06:00:00+01:00"},
	{name: "Berlin fold, start in the fold, repeated hour", zone: "Europe/Berlin", q: window("02:30", "06:00"), at: "2025-10-26T02:15:00+01:00", in: true, end: "2025-10-26T06:00:00+01:00"},
	{name: "Berlin fold, start in the fold, before", zone: "Europe/Berlin", q: window("02:30", "06:00"), at: "2025-10-26T02:15:00+02:00"},
	{name: "Berlin fold, window inside the fold", zone: "Europe/Berlin", q: window("02:10", "02:40"), at: "2026-10-25T02:20:00+02:00", in: true, end: "2026-10-25T02:40:00+02:00"},
	{name: "Berlin fold, window inside the fold, repeated", zone: "Europe/Berlin", q: window("02:10", "02:40"), at: "2026-10-25T02:20:00+01:00"},

	// New York springs forward on 2026-03-08 at 02:00 EST → 03:00 EDT (time.Date moves a
	// gap time back here, to 01:30 EST) and falls back on 2026-11-01 at 02:00 EDT → 01:00 EST.
	{name: "New York gap, end in the gap", zone: "America/New_York", q: window("22:00", "02:30"), at: "2026-03-08T01:45:00-05:00", in: true, end: "2026-03-08T03:00:00-04:00"},
	{name: "New York gap, end in the gap, after", zone: "America/New_York", q: window("22:00", "02:30"), at: "2026-03-08T03:00:00-04:00"},
	{name: "New York gap, start in the gap, before", zone: "America/New_York", q: window("02:30", "07:00"), at: "2026-03-08T01:45:00-05:00"},
	{name: "New York gap, start in the gap", zone: "America/New_York", q: window("02:30", "07:00"), at: "2026-03-08T03:00:00-04:00", in: true, end: "2026-03-08T07:00:00-04:00"},
	{name: "New York fold, end in the fold", zone: "America/New_York", q: window("22:00", "01:30"), at: "2026-11-01T01:15:00-04:00", in: true, end: "2026-11-01T01:30:00-04:00"},
	{name: "New York fold, end in the fold, no reopening", zone: "America/New_York", q: window("22:00", "01:30"), at: "2026-11-01T01:15:00-05:00"},
	{name: "New York fold, start in the fold", zone: "America/New_York", q: window("01:30", "06:00"), at: "2026-11-01T01:30:00-04:00", in: true, end: "2026-11-01T06:00:00-05:00"},
	{name: "New York fold, start in the fold, repeated hour", zone: "America/New_York", q: window("01:30", "06:00"), at: "2026-11-01T01:10:00-05:00", in: true, end: "2026-11-01T06:00:00-05:00"},

	// Lord Howe shifts by 30 minutes: back on 2026-04-05 at 02:00 → 01:30 (+11 → +10:30),
	// forward on 2026-10-04 at 02:00 → 02:30 (+10:30 → +11).
	{name: "Lord Howe fold, end in the fold", zone: "Australia/Lord_Howe", q: window("23:00", "01:45"), at: "2026-04-05T01:40:00+11:00", in: true, end: "2026-04-05T01:45:00+11:00"},
	{name: "Lord Howe fold, end in the fold, no reopening", zone: "Australia/Lord_Howe", q: window("23:00", "01:45"), at: "2026-04-05T01:40:00+10:30"},
	{name: "Lord Howe fold, start in the fold, repeated", zone: "Australia/Lord_Howe", q: window("01:45", "05:00"), at: "2026-04-05T01:35:00+10:30", in: true, end: "2026-04-05T05:00:00+10:30"},
	{name: "Lord Howe gap, end in the gap", zone: "Australia/Lord_Howe", q: window("23:00", "02:15"), at: "2026-10-04T01:59:00+10:30", in: true, end: "2026-10-04T02:30:00+11:00"},
	{name: "Lord Howe gap, end in the gap, after", zone: "Australia/Lord_Howe", q: window("23:00", "02:15"), at: "2026-10-04T02:30:00+11:00"},
	{name: "Lord Howe gap, start in the gap", zone: "Australia/Lord_Howe", q: window("02:15", "06:00"), at: "2026-10-04T02:30:00+11:00", in: true, end: "2026-10-04T06:00:00+11:00"},
	{name: "Lord Howe gap, start in the gap, before", zone: "Australia/Lord_Howe", q: window("02:15", "06:00"), at: "2026-10-04T01:59:00+10:30"},

	// Santiago changes at midnight: back on 2026-04-05 at 00:00 -03 → 2026-04-04 23:00 -04
	// (the fold crosses midnight), forward on 2026-09-06 at 00:00 -04 → 01:00 -03 (the day
	// has no midnight).
	{name: "Santiago fold across midnight, start in the fold", zone: "America/Santiago", q: window("23:30", "00:30"), at: "2026-04-04T23:10:00-04:00", in: true, end: "2026-04-05T00:30:00-04:00"},
	{name: "Santiago fold across midnight, end in the fold", zone: "America/Santiago", q: window("22:00", "23:30"), at: "2026-04-04T23:10:00-04:00"},
	{name: "Santiago fold across midnight, end in the fold, first", zone: "America/Santiago", q: window("22:00", "23:30"), at: "2026-04-04T23:10:00-03:00", in: true, end: "2026-04-04T23:30:00-03:00"},
	{name: "Santiago gap at midnight, end in the gap", zone: "America/Santiago", q: window("22:00", "00:30"), at: "2026-09-05T23:59:00-04:00", in: true, end: "2026-09-06T01:00:00-03:00"},
	{name: "Santiago gap at midnight, start at midnight", zone: "America/Santiago", q: window("00:00", "07:00"), at: "2026-09-06T01:00:00-03:00", in: true, end: "2026-09-06T07:00:00-03:00"},
	{name: "Santiago gap at midnight, start at midnight, before", zone: "America/Santiago", q: window("00:00", "07:00"), at: "2026-09-05T23:59:00-04:00"},

	// Sydney falls back on 2026-04-05 at 03:00 → 02:00 and springs forward on 2026-10-04 at
	// 02:00 → 03:00.
	{name: "Sydney fold, end in the fold", zone: "Australia/Sydney", q: window("22:00", "02:30"), at: "2026-04-05T02:15:00+11:00", in: true, end: "2026-04-05T02:30:00+11:00"},
	{name: "Sydney fold, end in the fold, no reopening", zone: "Australia/Sydney", q: window("22:00", "02:30"), at: "2026-04-05T02:15:00+10:00"},
	{name: "Sydney gap, end in the gap", zone: "Australia/Sydney", q: window("22:00", "02:30"), at: "2026-10-04T01:59:00+10:00", in: true, end: "2026-10-04T03:00:00+11:00"},
	{name: "Sydney fold, window around it", zone: "Australia/Sydney", q: window("22:00", "07:00"), at: "2026-04-04T23:00:00+11:00", in: true, end: "2026-04-05T07:00:00+10:00"},
}

// Away from DST changes (these were ingest's quietWindowEnd cases).
var plainCases = []quietCase{
	{name: "before the window", zone: "Europe/Berlin", q: window("22:00", "07:00"), at: "2026-06-10T21:59:00+02:00"},
	{name: "at the start", zone: "Europe/Berlin", q: window("22:00", "07:00"), at: "2026-06-10T22:00:00+02:00", in: true, end: "2026-06-11T07:00:00+02:00"},
	{name: "after midnight", zone: "Europe/Berlin", q: window("22:00", "07:00"), at: "2026-06-11T03:00:00+02:00", in: true, end: "2026-06-11T07:00:00+02:00"},
	{name: "at the end", zone: "Europe/Berlin", q: window("22:00", "07:00"), at: "2026-06-11T07:00:00+02:00"},
	{name: "midday", zone: "Europe/Berlin", q: window("22:00", "07:00"), at: "2026-06-11T12:00:00+02:00"},
	{name: "daytime window", zone: "Asia/Tokyo", q: window("13:00", "15:30"), at: "2026-06-11T14:00:00+09:00", in: true, end: "2026-06-11T15:30:00+09:00"},
	{name: "daytime window, outside", zone: "Asia/Tokyo", q: window("13:00", "15:30"), at: "2026-06-11T12:59:00+09:00"},
	{name: "user zone, not UTC", zone: "America/Los_Angeles", q: window("22:00", "07:00"), at: "2026-06-11T05:30:00Z", in: true, end: "2026-06-11T07:00:00-07:00"},
	// The night of a change lasts 8 wall-clock hours but 7 (or 9) real ones and ends at 07:00
	// local time either way.
	{name: "spring forward", zone: "America/New_York", q: window("22:00", "07:00"), at: "2026-03-07T23:00:00-05:00", in: true, end: "2026-03-08T07:00:00-04:00"},
	{name: "spring forward, after the gap", zone: "America/New_York", q: window("22:00", "07:00"), at: "2026-03-08T03:30:00-04:00", in: true, end: "2026-03-08T07:00:00-04:00"},
	{name: "fall back", zone: "America/New_York", q: window("22:00", "07:00"), at: "2026-10-31T23:00:00-04:00", in: true, end: "2026-11-01T07:00:00-05:00"},
	{name: "fall back, repeated hour", zone: "America/New_York", q: window("22:00", "07:00"), at: "2026-11-01T01:30:00-05:00", in: true, end: "2026-11-01T07:00:00-05:00"},
	{name: "window around the gap, after", zone: "Europe/Berlin", q: window("01:00", "04:00"), at: "2026-03-29T04:00:00+02:00"},
	{name: "southern hemisphere fall back", zone: "Australia/Sydney", q: window("22:00", "07:00"), at: "2026-04-04T23:00:00+11:00", in: true, end: "2026-04-05T07:00:00+10:00"},
	{name: "sub-minute edges", zone: "UTC", q: QuietHours{Start: 13*time.Hour + 1500*time.Millisecond, End: 14*time.Hour + 30*time.Microsecond}, at: "2026-06-11T13:00:01.5Z", in: true, end: "2026-06-11T14:00:00.00003Z"},
	{name: "no window", zone: "UTC", q: window("13:00", "13:00"), at: "2026-06-11T13:00:00Z"},
}

func TestQuietEnd(t *testing.T) {
	for _, cases := range [][]quietCase{dstCases, plainCases} {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				end, in := QuietEnd(instant(tc.at), mustLoc(t, tc.zone), tc.q)
				require.Equal(t, tc.in, in, "quiet at %s", tc.at)
				if tc.in {
					require.True(t, instant(tc.end).Equal(end), "end %s, want %s", end.UTC(), instant(tc.end))
				}
			})
		}
	}
}

func TestQuietHoursOf(t *testing.T) {
	require.Nil(t, QuietHoursOf(pgTime(-1), pgTime(7*60)))
	require.Nil(t, QuietHoursOf(pgTime(22*60), pgTime(-1)))
	require.Nil(t, QuietHoursOf(pgTime(7*60), pgTime(7*60)), "an empty window is none")
	require.Equal(t, &QuietHours{Start: 22 * time.Hour, End: 7 * time.Hour}, QuietHoursOf(pgTime(22*60), pgTime(7*60)))
}

func TestLocation(t *testing.T) {
	a, err := Location("Europe/Berlin")
	require.NoError(t, err)
	b, err := Location("Europe/Berlin")
	require.NoError(t, err)
	require.Same(t, a, b, "loaded once")
	_, err = Location("Mars/Olympus")
	require.Error(t, err)
	require.Equal(t, time.UTC, LocationOrUTC("Mars/Olympus"))
	require.Equal(t, time.UTC, LocationOrUTC(""))
}

// BenchmarkQuietEnd is one decision of a campaign lot's user or a retry: a time inside a
// window across midnight, in a zone with DST.
func BenchmarkQuietEnd(b *testing.B) {
	loc := mustLoc(b, "Europe/Berlin")
	q := window("22:00", "07:00")
	at := instant("2026-06-11T03:00:00+02:00")
	for b.Loop() {
		if _, in := QuietEnd(at, loc, q); !in {
			b.Fatal("not quiet")
		}
	}
}
