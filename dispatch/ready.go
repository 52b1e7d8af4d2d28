package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNotReady is what Ready wraps while dispatch cannot yet do its work.
var ErrNotReady = errors.New("dispatch not ready")

// Ready reports whether every lane this process runs (Config.Run) can take records: it has
// joined its consumer group and received its assignment — possibly empty: a process beyond
// the partition count is ready and idle — the HIGH lane's connections are open (warm.go), and
// dispatch's pool answers. Until then a record produced for a lane would wait for the group's
// join, and the first HIGH deliveries for their connections, which is what a first delivery
// after a start paid before.
func (d *Dispatcher) Ready(ctx context.Context) error {
	for _, p := range d.cfg.Run {
		if l := d.lanes[p]; !l.assigned.Load() {
			return fmt.Errorf("%w: lane %s has no assignment from group %s yet", ErrNotReady, p, l.cfg.Group)
		}
	}
	if !d.warmed.Load() {
		return fmt.Errorf("%w: the HIGH lane's database connections are still opening", ErrNotReady)
	}
	if err := d.pool.Ping(ctx); err != nil {
		return fmt.Errorf("%w: database: %w", ErrNotReady, err)
	}
	return nil
}

// onAssigned marks the lane assigned: the group has been joined and synced. franz-go calls it
// after every join, also when nothing is assigned.
func (l *lane) onAssigned(context.Context, *kgo.Client, map[string][]int32) {
	l.assigned.Store(true)
}
