package cdc

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ackLatencies records, for the rows the relay streamed, commit → Kafka ack and its two
// parts: commit → the relay received the transaction (PostgreSQL's WAL flush and the
// walsender) and received → ack (decode and produce). Values in µs.
type ackLatencies struct {
	mu                  sync.Mutex
	total, wal, produce *hdrhistogram.Histogram
}

// startRelayMeasuringAcks starts the harness's relay with an ack hook that records the rows
// keep accepts (nil: every streamed row).
func (h *harness) startRelayMeasuringAcks(keep func(deliveryRow) bool) *ackLatencies {
	longest := int64(10 * time.Second / time.Microsecond)
	a := &ackLatencies{total: hdrhistogram.New(1, longest, 3), wal: hdrhistogram.New(1, longest, 3), produce: hdrhistogram.New(1, longest, 3)}
	h.startRelay(h.cfg, func(r *Relay) {
		r.pub.ackHook = func(row deliveryRow, o origin, ackedAt time.Time) {
			if o.source != sourceStream || keep != nil && !keep(row) {
				return
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			_ = a.total.RecordValue(ackedAt.Sub(o.commitTime).Microseconds())
			_ = a.wal.RecordValue(max(1, o.receivedAt.Sub(o.commitTime).Microseconds()))
			_ = a.produce.RecordValue(max(1, ackedAt.Sub(o.receivedAt).Microseconds()))
		}
	})
	return a
}

// reset forgets what the warm-up recorded.
func (a *ackLatencies) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total.Reset()
	a.wal.Reset()
	a.produce.Reset()
}

// ms is quantile q (0–100) of histogram h in ms; call it holding a.mu or after the relay stopped acking.
func ms(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
