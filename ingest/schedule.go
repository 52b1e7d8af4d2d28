package ingest

import (
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// quietHours is a daily window of wall-clock times in the user's time zone during which
// NORMAL and LOW deliveries wait. start > end spans midnight ("22:00"–"07:00"); start ==
// end is rejected at input.
type quietHours struct {
	start, end clock
}

// quietWindowEnd reports whether the instant t falls inside a quiet window in loc, and if so
// the instant that window ends.
//
// The window is built from wall-clock dates and times with time.Date in loc, never by adding
// durations, so it stays correct across DST changes: a 22:00–07:00 window over the
// spring-forward night lasts 8 hours of wall clock but 7 real hours, and ends at 07:00 local
// time either way. A window edge that falls into a DST gap moves as time.Date normalizes it
// (by the length of the gap).
func quietWindowEnd(t time.Time, loc *time.Location, q quietHours) (time.Time, bool) {
	if q.start == q.end {
		return time.Time{}, false
	}
	lt := t.In(loc)
	y, m, d := lt.Date()
	// A window that contains t started on t's local date or, when it spans midnight, on
	// the day before.
	for _, offset := range []int{-1, 0} {
		ws := wallClock(y, m, d+offset, q.start, loc)
		endDay := d + offset
		if q.start > q.end {
			endDay++
		}
		we := wallClock(y, m, endDay, q.end, loc)
		if !t.Before(ws) && t.Before(we) {
			return we, true
		}
	}
	return time.Time{}, false
}

func wallClock(y int, m time.Month, d int, c clock, loc *time.Location) time.Time {
	return time.Date(y, m, d, int(c)/60, int(c)%60, 0, 0, loc)
}

// firstAttempt decides a notification's first next_attempt_at. now is the transaction's
// clock (PostgreSQL now()). It returns nil when the deliveries are due at once, so the
// insert leaves next_attempt_at to its column default, now(); otherwise the instant:
//
//   - sendAt in the future defers to sendAt;
//   - quiet hours then defer NORMAL and LOW to the end of the window that contains the
//     moment the delivery would otherwise go (now or sendAt); HIGH ignores quiet hours.
func firstAttempt(now time.Time, sendAt *time.Time, prio herald.Priority, loc *time.Location, q *quietHours) *time.Time {
	at, deferred := now, false
	if sendAt != nil && sendAt.After(now) {
		at, deferred = *sendAt, true
	}
	if q != nil && prio != herald.PriorityHigh {
		if end, in := quietWindowEnd(at, loc, *q); in {
			at, deferred = end, true
		}
	}
	if !deferred {
		return nil
	}
	at = at.UTC()
	return &at
}

// locations caches loaded time zones: time.LoadLocation reads and parses the zone file on
// every call. The set of zone names is small and fixed, so the cache needs no bound beyond
// what input validation allows (names that load).
var locations sync.Map // string → *time.Location

func loadLocation(name string) (*time.Location, error) {
	if loc, ok := locations.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, loc)
	return loc, nil
}
