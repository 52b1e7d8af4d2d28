package dispatch

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// offsetTracker keeps, per partition, the records polled but not yet finished, in offset
// order. Records finish in any order (a lane runs more of them at once than it has
// partitions); only the contiguous finished prefix of a partition may be committed, so a
// crash never skips an unfinished record.
type offsetTracker struct {
	mu      sync.Mutex
	parts   map[topicPartition]*partOffsets
	changed chan struct{} // closed and replaced whenever a record finishes
}

type topicPartition struct {
	topic     string
	partition int32
}

type partOffsets struct {
	pending   []*tracked // polled, in offset order, not yet popped
	last      int64      // offset of the last record added
	next      kgo.EpochOffset
	hasNext   bool  // next holds a commit not yet made
	committed int64 // last committed offset, -1 if none
	dropped   bool  // revoked or lost: never commit for it again
}

// tracked is one polled record.
type tracked struct {
	part    *partOffsets
	offset  int64
	epoch   int32
	started bool
	done    bool
}

func newOffsetTracker() *offsetTracker {
	return &offsetTracker{parts: make(map[topicPartition]*partOffsets), changed: make(chan struct{})}
}

// add registers a polled record. Records of a partition arrive in offset order; one that
// does not (a stale fetch racing a re-assignment) is returned untracked.
func (t *offsetTracker) add(r *kgo.Record) *tracked {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := topicPartition{r.Topic, r.Partition}
	p := t.parts[k]
	if p == nil {
		p = &partOffsets{last: -1, committed: -1}
		t.parts[k] = p
	}
	tr := &tracked{part: p, offset: r.Offset, epoch: r.LeaderEpoch}
	if r.Offset <= p.last {
		tr.part = nil
		return tr
	}
	p.last = r.Offset
	p.pending = append(p.pending, tr)
	return tr
}

// start marks tr as being processed. It returns false when its partition was taken away
// before the record started: the new owner will process it.
func (t *offsetTracker) start(tr *tracked) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr.part != nil && tr.part.dropped {
		return false
	}
	tr.started = true
	return true
}

// done marks tr finished and advances its partition's committable prefix.
func (t *offsetTracker) done(tr *tracked) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr.done = true
	if p := tr.part; p != nil {
		for len(p.pending) > 0 && p.pending[0].done {
			head := p.pending[0]
			p.pending[0] = nil
			p.pending = p.pending[1:]
			p.next = kgo.EpochOffset{Epoch: head.epoch, Offset: head.offset + 1}
			p.hasNext = true
		}
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// inFlight returns how many started, unfinished records the given partitions hold (all
// partitions when parts is nil), and a channel closed at the next change.
func (t *offsetTracker) inFlight(parts map[string][]int32) (int, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	count := func(p *partOffsets) {
		for _, tr := range p.pending {
			if tr.started && !tr.done {
				n++
			}
		}
	}
	if parts == nil {
		for _, p := range t.parts {
			count(p)
		}
	}
	for topic, ps := range parts {
		for _, part := range ps {
			if p := t.parts[topicPartition{topic, part}]; p != nil {
				count(p)
			}
		}
	}
	return n, t.changed
}

// uncommitted returns the committable offsets not yet committed, for the given partitions
// (all when parts is nil).
func (t *offsetTracker) uncommitted(parts map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]map[int32]kgo.EpochOffset)
	for k, p := range t.parts {
		if p.dropped || !p.hasNext || p.next.Offset <= p.committed {
			continue
		}
		if parts != nil && !contains(parts[k.topic], k.partition) {
			continue
		}
		if out[k.topic] == nil {
			out[k.topic] = make(map[int32]kgo.EpochOffset)
		}
		out[k.topic][k.partition] = p.next
	}
	return out
}

// committed records offsets as committed.
func (t *offsetTracker) committed(offsets map[string]map[int32]kgo.EpochOffset) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range offsets {
		for part, eo := range ps {
			if p := t.parts[topicPartition{topic, part}]; p != nil && eo.Offset > p.committed {
				p.committed = eo.Offset
			}
		}
	}
}

// drop forgets partitions that were revoked or lost.
func (t *offsetTracker) drop(parts map[string][]int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range parts {
		for _, part := range ps {
			k := topicPartition{topic, part}
			if p := t.parts[k]; p != nil {
				p.dropped = true
				delete(t.parts, k)
			}
		}
	}
}

func contains(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}
