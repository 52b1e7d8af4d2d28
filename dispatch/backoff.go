package dispatch

import (
	"cmp"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// delay returns how long to wait before the next attempt after attempt n (1-based) failed
// transiently: full jitter, uniform in [0, min(Max, Base·2^(n-1))), at nanosecond precision,
// or the provider's Retry-After when that is longer (the provider's word beats Max), capped
// at MaxRetryAfter (an absurd Retry-After must not park a delivery for years; a zero
// MaxRetryAfter counts as DefaultRetryPolicy's). rnd returns a float in [0, 1).
func (p RetryPolicy) delay(n int, retryAfter time.Duration, rnd func() float64) time.Duration {
	d := time.Duration(rnd() * float64(p.ceiling(n)))
	retryAfter = min(retryAfter, cmp.Or(p.MaxRetryAfter, DefaultRetryPolicy.MaxRetryAfter))
	if retryAfter > d {
		d = retryAfter
	}
	return d
}

// ceiling is the upper bound of the delay after attempt n: min(Max, Base·2^(n-1)).
func (p RetryPolicy) ceiling(n int) time.Duration {
	c := p.Base
	for i := 1; i < n && c < p.Max; i++ {
		c *= 2
	}
	if c > p.Max {
		c = p.Max
	}
	return c
}

// quietEnd returns the end of the user's quiet hours if at falls inside them. Quiet hours are
// wall-clock times in the user's time zone (an unknown zone counts as UTC); a window whose
// start is after its end spans midnight. It does not apply to HIGH deliveries (the caller
// checks).
func quietEnd(at time.Time, tz string, start, end pgtype.Time) (time.Time, bool) {
	if !start.Valid || !end.Valid || start.Microseconds == end.Microseconds {
		return time.Time{}, false
	}
	loc, err := time.LoadLocation(tz)
	if tz == "" || err != nil {
		loc = time.UTC
	}
	local := at.In(loc)
	y, m, d := local.Date()
	tod := time.Duration(local.Hour())*time.Hour + time.Duration(local.Minute())*time.Minute +
		time.Duration(local.Second())*time.Second + time.Duration(local.Nanosecond())
	s := time.Duration(start.Microseconds) * time.Microsecond
	e := time.Duration(end.Microseconds) * time.Microsecond
	at0 := func(day int, t time.Duration) time.Time {
		h, mi, sec := int(t/time.Hour), int(t%time.Hour/time.Minute), int(t%time.Minute/time.Second)
		return time.Date(y, m, day, h, mi, sec, int(t%time.Second), loc)
	}
	switch {
	case s < e && tod >= s && tod < e:
		return at0(d, e), true
	case s > e && tod >= s:
		return at0(d+1, e), true
	case s > e && tod < e:
		return at0(d, e), true
	}
	return time.Time{}, false
}
