package relay

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// acks is a kgo hook on a relay's producer: when Kafka acknowledged each delivery's first
// record. It splits a row's latency into commit → ack (the relay) and ack → visible (the
// consumer's fetch).
type acks struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newAcks() *acks { return &acks{at: map[string]time.Time{}} }

// OnProduceRecordUnbuffered implements kgo.HookProduceRecordUnbuffered.
func (a *acks) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil {
		return
	}
	now := time.Now()
	a.mu.Lock()
	if _, ok := a.at[string(r.Key)]; !ok {
		a.at[string(r.Key)] = now
	}
	a.mu.Unlock()
}

func (a *acks) get(id string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.at[id]
	return at, ok
}
