// Package pace spaces batches of background work (a campaign's lots, a re-drive's lots) so
// that they write rows at no more than a rate on average, leaving CPU and WAL bandwidth to
// HIGH notifications (docs/architecture.md "Campaigns").
package pace

import "time"

// Pacer spaces lots so that rows are written at no more than a rate on average: the next lot
// may start once the rows written so far would have taken that long at the rate. Idle time
// does not bank credit beyond one lot: work starting after a quiet hour is paced from its
// first lot. The zero value is ready; a Pacer belongs to one loop.
type Pacer struct {
	next time.Time
	// The last lot's rows and the rate its budget was given at, for Rerate.
	rows, rate int
}

// Wait returns how long to wait before the next lot, after a lot that started at started,
// ended at now and wrote n rows; rate < 0 never waits.
func (p *Pacer) Wait(started, now time.Time, n, rate int) time.Duration {
	p.rows, p.rate = 0, 0
	if rate < 0 || n == 0 {
		return 0
	}
	if p.next.Before(started) {
		p.next = started
	}
	p.next = p.next.Add(budget(n, rate))
	p.rows, p.rate = n, rate
	return max(p.next.Sub(now), 0)
}

// Rerate returns how long to wait from now before the next lot when the rate has become rate
// during the wait Wait returned (an adaptive limit that stepped): the last lot's budget is
// given again at the new rate, so that the pause follows the limit as it moves instead of
// keeping the rate of the moment the lot ended. A rate < 0 (unpaced) ends the wait.
func (p *Pacer) Rerate(now time.Time, rate int) time.Duration {
	switch {
	case p.rows == 0: // the lot was not paced: Wait returned 0
		return 0
	case rate == p.rate:
		return max(p.next.Sub(now), 0)
	case rate < 0:
		p.next = now
		p.rows, p.rate = 0, 0
		return 0
	}
	p.next = p.next.Add(budget(p.rows, rate) - budget(p.rows, p.rate))
	p.rate = rate
	return max(p.next.Sub(now), 0)
}

// budget is the time n rows take at rate rows per second.
func budget(n, rate int) time.Duration {
	return time.Duration(n) * time.Second / time.Duration(max(rate, 1))
}
