package adapt

import (
	"slices"
	"sync"
	"time"
)

// window gathers one process's HIGH latencies between two reports.
type window struct {
	mu sync.Mutex
	d  []time.Duration
}

// maxWindow bounds the latencies a window keeps: at HIGH rates beyond it per interval the
// later ones are dropped, which leaves the quantile a fair sample.
const maxWindow = 4096

func (w *window) add(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.d) < maxWindow {
		w.d = append(w.d, d)
	}
}

// take returns the window's 90th percentile (its largest value when it holds fewer than ten)
// and empties it; ok is false when it held nothing.
func (w *window) take() (q time.Duration, ok bool) {
	w.mu.Lock()
	d := w.d
	w.d = nil
	w.mu.Unlock()
	if len(d) == 0 {
		return 0, false
	}
	slices.Sort(d)
	i := (len(d)*9+9)/10 - 1 // ceil(0.9 n) - 1
	return d[i], true
}
