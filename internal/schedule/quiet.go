package schedule

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// QuietHours is a daily window of times of day on the user's clock, in the user's time zone,
// during which NORMAL and LOW deliveries wait. Start after End spans midnight ("22:00"–
// "07:00"); Start equal to End is no window (ingest rejects it on input).
type QuietHours struct {
	// Start and End are times of day as durations since midnight, in [0, 24 h).
	Start, End time.Duration
}

// QuietHoursOf converts the two `time` columns of user_preference, or returns nil when the
// user has no quiet hours (either is NULL, or they are equal).
func QuietHoursOf(start, end pgtype.Time) *QuietHours {
	if !start.Valid || !end.Valid || start.Microseconds == end.Microseconds {
		return nil
	}
	return &QuietHours{
		Start: time.Duration(start.Microseconds) * time.Microsecond,
		End:   time.Duration(end.Microseconds) * time.Microsecond,
	}
}

// QuietEnd reports whether the instant t falls inside a quiet window of q in loc and, if so,
// the instant that window ends (in loc). The end is exclusive: at the end instant t is not
// quiet.
//
// The window of local date D runs from the first instant at which the user's clock reads
// (D, Start) or later to the first instant at which it reads (D, End) or later — (D+1, End)
// when the window spans midnight. A time of day that a DST change skips (a gap) therefore
// falls on the change itself, the first instant after the gap; one that it repeats (a fold)
// is its first occurrence: a window never reopens in the repeated hour. docs/architecture.md
// says why.
func QuietEnd(t time.Time, loc *time.Location, q QuietHours) (time.Time, bool) {
	if q.Start == q.End {
		return time.Time{}, false
	}
	y, m, d := t.In(loc).Date()
	// The window that contains t opened on t's local date or the day before (a window
	// spanning midnight), or the day after when a fold took the clock back across midnight.
	for offset := -1; offset <= 1; offset++ {
		start, end := q.window(y, m, d+offset, loc)
		if !t.Before(start) && t.Before(end) {
			return end, true
		}
	}
	return time.Time{}, false
}

// window returns the instants the window of local date y-m-d starts and ends. It may be
// empty (start == end) when both edges fall into one DST gap.
func (q QuietHours) window(y int, m time.Month, d int, loc *time.Location) (start, end time.Time) {
	endDay := d
	if q.Start > q.End {
		endDay++
	}
	return firstReading(y, m, d, q.Start, loc), firstReading(y, m, endDay, q.End, loc)
}

// firstReading returns the first instant at which the clock in loc reads the date y-m-d (out
// of range values normalize, as for time.Date) at time of day tod, or later. Outside DST
// changes that is the instant the clock reads exactly that; in a gap it is the end of the gap
// (the change), in a fold the first occurrence.
//
// time.Date does not do this: for a skipped or repeated wall time its choice depends on the
// sign of the zone's offset (a Berlin gap time moves forward by the gap, a New York one back;
// a Berlin fold time is its second occurrence, a New York one its first).
func firstReading(y int, m time.Month, d int, tod time.Duration, loc *time.Location) time.Time {
	// wall is the wanted reading, written as if it were a UTC instant.
	wall := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(tod)
	// No zone is more than 14 h ahead of UTC, so 15 h before wall the clock reads earlier
	// than wall. From there walk the zone periods forward: within a period of offset off the
	// clock reads t+off, rising with t, so the earliest instant of the period that reads wall
	// or later is max(period start, wall-off); the first period that has one has the answer.
	t := wall.Add(-15 * time.Hour)
	for {
		lt := t.In(loc)
		_, off := lt.Zone()
		cand := wall.Add(-time.Duration(off) * time.Second)
		if cand.Before(t) { // the clock jumped past wall at the start of this period
			cand = t
		}
		_, next := lt.ZoneBounds()
		if next.IsZero() || cand.Before(next) {
			return cand.In(loc)
		}
		t = next
	}
}
