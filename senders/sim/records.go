package sim

import (
	"sync"
	"time"
)

// Record is one request the simulator received.
type Record struct {
	// Seq numbers records from 1 in arrival order; it survives nothing but Reset.
	Seq      int64  `json:"seq"`
	Provider string `json:"provider"`
	// Key is the request's idempotency key: the delivery id (apns-id, FCM data
	// herald_delivery_id, Idempotency-Key, the local part of the Message-ID).
	Key        string    `json:"key"`
	ReceivedAt time.Time `json:"receivedAt"`
	Outcome    Outcome   `json:"outcome"`
	// Status is the HTTP status or SMTP reply code answered; 0 for a timeout.
	Status int `json:"status"`
	// DelayMs is the injected response delay.
	DelayMs float64 `json:"delayMs"`
	// Traceparent is the request's W3C traceparent header, when it carried one.
	Traceparent string `json:"traceparent,omitempty"`
}

// Stats summarises the records of one provider.
type Stats struct {
	Requests  int64             `json:"requests"`
	Outcomes  map[Outcome]int64 `json:"outcomes"`
	Delivered int64             `json:"delivered"`
	// Distinct is the number of distinct keys delivered.
	Distinct int64 `json:"distinct"`
	// Duplicates counts deliveries of a key that had already been delivered.
	Duplicates int64 `json:"duplicates"`
}

// store keeps the records, bounded, and the per-key delivery counts (unbounded by design:
// a duplicate must be seen however far apart its copies are).
type store struct {
	max int

	mu        sync.Mutex
	seq       int64
	recs      []Record
	dropped   int64
	stats     map[string]*Stats
	delivered map[string]int // provider + "\x00" + key → deliveries
}

func newStore(max int) *store {
	s := &store{max: max}
	s.reset()
	return s
}

func (s *store) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq, s.recs, s.dropped = 0, nil, 0
	s.stats = make(map[string]*Stats)
	s.delivered = make(map[string]int)
}

func (s *store) add(r Record) Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	r.Seq = s.seq
	if len(s.recs) >= s.max {
		drop := max(len(s.recs)/10, 1)
		s.recs = append(s.recs[:0], s.recs[drop:]...)
		s.dropped += int64(drop)
	}
	s.recs = append(s.recs, r)
	st := s.stats[r.Provider]
	if st == nil {
		st = &Stats{Outcomes: make(map[Outcome]int64)}
		s.stats[r.Provider] = st
	}
	st.Requests++
	st.Outcomes[r.Outcome]++
	if r.Outcome.Delivered() {
		st.Delivered++
		k := r.Provider + "\x00" + r.Key
		s.delivered[k]++
		if s.delivered[k] == 1 {
			st.Distinct++
		} else {
			st.Duplicates++
		}
	}
	return r
}

// list returns up to limit records after seq since, of provider ("" for all).
func (s *store) list(provider string, since int64, limit int) ([]Record, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Record{}
	for _, r := range s.recs {
		if r.Seq <= since || (provider != "" && r.Provider != provider) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, r)
	}
	return out, s.dropped
}

func (s *store) snapshot() map[string]Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Stats, len(s.stats))
	for p, st := range s.stats {
		c := *st
		c.Outcomes = make(map[Outcome]int64, len(st.Outcomes))
		for o, n := range st.Outcomes {
			c.Outcomes[o] = n
		}
		out[p] = c
	}
	return out
}
