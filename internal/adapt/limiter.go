// Package adapt lets background work (the NORMAL and LOW dispatch lanes, the campaign
// expander, the re-drive executor) give way to HIGH notifications: an AIMD limiter per piece
// of work, driven by a signal that every herald process shares through Redis — HIGH's recent
// accept → provider latency, published by the dispatch processes that send HIGH, and the
// relay's lag, published by the relay. A limiter's ceiling is the configured concurrency or
// rate; without a fresh signal it stays at the ceiling. See docs/dispatch.md "Adaptive limits".
package adapt

import (
	"math"
	"sync"
)

// AIMD steps of a Limiter: on congestion the limit is multiplied by decreaseFactor, otherwise
// it grows by increaseShare of the ceiling per step, so that it is back at the ceiling within
// 1/increaseShare steps of the congestion ending.
const (
	decreaseFactor = 0.7
	increaseShare  = 0.1
	// FloorShare is the share of the ceiling a limit never goes below: background work
	// slows down, it never stops.
	FloorShare = 0.1
)

// Limiter is one adaptive limit: a concurrency (workers) or a rate (rows per second) between a
// floor and a ceiling. It is stepped by its Controller and read by the work it limits.
type Limiter struct {
	name    string
	ceiling float64
	floor   float64

	mu      sync.Mutex
	limit   float64
	changed chan struct{} // one pending notice of a change of Limit, for the one reader that waits
}

// NewLimiter returns a limiter at its ceiling, which must be at least 1; the floor is
// FloorShare of it, at least 1.
func NewLimiter(name string, ceiling int) *Limiter {
	c := float64(max(ceiling, 1))
	return &Limiter{name: name, ceiling: c, floor: max(1, math.Floor(c*FloorShare)), limit: c,
		changed: make(chan struct{}, 1)}
}

// Name is the limiter's name, the limiter attribute of its metric.
func (l *Limiter) Name() string { return l.name }

// Ceiling is the configured limit, the most the limiter ever allows.
func (l *Limiter) Ceiling() int { return int(l.ceiling) }

// Limit is the current limit, in [floor, ceiling].
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return whole(l.limit)
}

// whole is a limit rounded down to a whole worker or row, forgiving the float error of a
// product (4,000 × 0.7 × 0.7 is 1,960, not 1,959).
func whole(f float64) int { return int(f + 1e-6) }

// Changed receives a value after Limit changed (one pending notice at most): the one
// goroutine that follows the limit waits on it instead of polling.
func (l *Limiter) Changed() <-chan struct{} { return l.changed }

// Step moves the limit one AIMD step for a signal: down by decreaseFactor when it says HIGH is
// congested, up by increaseShare of the ceiling when it says HIGH is well, to the ceiling at
// once when there is no signal (no HIGH traffic and no relay to report, or Redis unreachable).
func (l *Limiter) Step(v Verdict) {
	l.mu.Lock()
	before := whole(l.limit)
	switch v {
	case Unknown:
		l.limit = l.ceiling
	case Congested:
		l.limit = max(l.floor, l.limit*decreaseFactor)
	case Clear:
		l.limit = min(l.ceiling, l.limit+max(1, l.ceiling*increaseShare))
	}
	after := whole(l.limit)
	l.mu.Unlock()
	if after != before {
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}
}

// Verdict is what a signal says about HIGH, for a Limiter's step.
type Verdict int

// Verdicts of Targets.Judge.
const (
	Unknown   Verdict = iota // no fresh signal: fall back to the ceiling
	Clear                    // HIGH within its targets: grow
	Congested                // HIGH past a target: shrink
)

func (v Verdict) String() string {
	switch v {
	case Clear:
		return "clear"
	case Congested:
		return "congested"
	}
	return "unknown"
}
