package ingest

import "time"

// pacer spaces lots so that deliveries are written at no more than a rate on average: the
// next lot may start once the deliveries written so far would have taken that long at the
// rate. Idle time does not bank credit beyond one lot: a campaign starting after a quiet hour
// is paced from its first lot.
type pacer struct{ next time.Time }

// wait returns how long to wait before the next lot, after a lot that started at started,
// ended at now and wrote n deliveries; rate < 0 never waits.
func (p *pacer) wait(started, now time.Time, n, rate int) time.Duration {
	if rate < 0 || n == 0 {
		return 0
	}
	if p.next.Before(started) {
		p.next = started
	}
	p.next = p.next.Add(time.Duration(n) * time.Second / time.Duration(rate))
	return max(p.next.Sub(now), 0)
}
