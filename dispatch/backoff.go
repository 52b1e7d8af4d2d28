package dispatch

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald/internal/schedule"
)

// delay returns how long to wait before the next attempt after attempt n (1-based) failed
// transiently: the policy's backoff (internal/schedule: full jitter, Retry-After honoured up
// to MaxRetryAfter). rnd returns a float in [0, 1).
func (p RetryPolicy) delay(n int, retryAfter time.Duration, rnd func() float64) time.Duration {
	return p.backoff().Delay(n, retryAfter, rnd)
}

// ceiling is the upper bound of the delay after attempt n: min(Max, Base·2^(n-1)).
func (p RetryPolicy) ceiling(n int) time.Duration { return p.backoff().Ceiling(n) }

func (p RetryPolicy) backoff() schedule.Backoff {
	return schedule.Backoff{Base: p.Base, Max: p.Max, MaxRetryAfter: p.MaxRetryAfter}
}

// quietEnd returns the end of the user's quiet hours if at falls inside them, by the rule
// ingest's first attempt uses (schedule.QuietEnd; an unknown zone counts as UTC). It does not
// apply to HIGH deliveries (the caller checks).
func quietEnd(at time.Time, tz string, start, end pgtype.Time) (time.Time, bool) {
	q := schedule.QuietHoursOf(start, end)
	if q == nil {
		return time.Time{}, false
	}
	return schedule.QuietEnd(at, schedule.LocationOrUTC(tz), *q)
}
