package schedule

import (
	"time"

	"github.com/heraldhq/herald"
)

// Defer returns when a delivery of priority prio that could go at at may go: at the end of
// the quiet window that contains at for NORMAL and LOW, at itself otherwise (HIGH ignores
// quiet hours; q nil: the user has none). deferred says whether quiet hours moved it.
func Defer(at time.Time, prio herald.Priority, loc *time.Location, q *QuietHours) (_ time.Time, deferred bool) {
	if q == nil || prio == herald.PriorityHigh {
		return at, false
	}
	if end, in := QuietEnd(at, loc, *q); in {
		return end, true
	}
	return at, false
}

// FirstAttempt decides a notification's first next_attempt_at. now is the accepting
// transaction's clock (PostgreSQL now()). It returns nil when the deliveries are due at once,
// so the insert leaves next_attempt_at to its column default, now(); otherwise the instant,
// in UTC:
//
//   - sendAt in the future defers to sendAt;
//   - quiet hours then defer NORMAL and LOW to the end of the window that contains the
//     moment the delivery would otherwise go (now or sendAt); HIGH ignores quiet hours.
func FirstAttempt(now time.Time, sendAt *time.Time, prio herald.Priority, loc *time.Location, q *QuietHours) *time.Time {
	at, deferred := now, false
	if sendAt != nil && sendAt.After(now) {
		at, deferred = *sendAt, true
	}
	at, quiet := Defer(at, prio, loc, q)
	if !deferred && !quiet {
		return nil
	}
	at = at.UTC()
	return &at
}

// RetryDelay is how long a retry waits from now: delay (Backoff.Delay), pushed to the end of
// the user's quiet hours when now+delay falls inside them (NORMAL and LOW).
func RetryDelay(now time.Time, delay time.Duration, prio herald.Priority, loc *time.Location, q *QuietHours) time.Duration {
	at, _ := Defer(now.Add(delay), prio, loc, q)
	return at.Sub(now)
}
