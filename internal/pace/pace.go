// Package pace spaces batches of background work (a campaign's lots, a re-drive's lots) so
// that they write rows at no more than a rate on average, leaving CPU and WAL bandwidth to
// HIGH notifications (docs/architecture.md "Campaigns").
package pace

import "time"

// Pacer spaces lots so that rows are written at no more than a rate on average: the next lot
// may start once the rows written so far would have taken that long at the rate. Idle time
// does not bank credit beyond one lot: work starting after a quiet hour is paced from its
// first lot. The zero value is ready; a Pacer belongs to one loop.
type Pacer struct{ next time.Time }

// Wait returns how long to wait before the next lot, after a lot that started at started,
// ended at now and wrote n rows; rate < 0 never waits.
func (p *Pacer) Wait(started, now time.Time, n, rate int) time.Duration {
	if rate < 0 || n == 0 {
		return 0
	}
	if p.next.Before(started) {
		p.next = started
	}
	p.next = p.next.Add(time.Duration(n) * time.Second / time.Duration(rate))
	return max(p.next.Sub(now), 0)
}
