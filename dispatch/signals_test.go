package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/heraldhq/herald"
)

// signalCounts counts one dispatcher's path signals per lane: the tests' window on the path.
type signalCounts struct {
	n map[herald.Priority]*[numSignals]atomic.Int64
}

// countSignals installs a signalCounts on d; call it before d runs.
func countSignals(d *Dispatcher) *signalCounts {
	c := &signalCounts{n: make(map[herald.Priority]*[numSignals]atomic.Int64, len(herald.Priorities))}
	for _, p := range herald.Priorities {
		c.n[p] = new([numSignals]atomic.Int64)
	}
	d.signals = func(p herald.Priority, s signal) { c.n[p][s].Add(1) }
	return c
}

// count is how many times lane p sent s.
func (c *signalCounts) count(p herald.Priority, s signal) int64 { return c.n[p][s].Load() }

var (
	signalsMu sync.Mutex
	signalsOf = map[*Dispatcher]*signalCounts{}
)

// signals returns the counts env.start installed on d.
func signals(d *Dispatcher) *signalCounts {
	signalsMu.Lock()
	defer signalsMu.Unlock()
	return signalsOf[d]
}
