package events

import (
	"context"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/endpoint"
)

// queues holds the messages of each endpoint in memory, in arrival order, with up to
// concurrency workers per endpoint that start when messages arrive and stop when their queue
// is empty. Nothing waits on a full queue: a message that does not fit is handed back to
// PostgreSQL, where the sweeper finds it later. So one slow endpoint fills only its own
// queue and holds only its own workers.
type queues struct {
	concurrency, size int
	lease             time.Duration
	r                 *Role

	mu      sync.Mutex
	byID    map[string]*queue
	held    map[heldKey]time.Time // every message in a queue or being sent, by when it was claimed
	stopped bool
	wg      sync.WaitGroup
	ctx     context.Context // the workers' context, cancelled by stop's deadline
	cancel  context.CancelFunc
}

type heldKey struct{ endpoint, event string }

type queue struct {
	msgs    []endpoint.Message
	workers int
}

func newQueues(concurrency, size int, lease time.Duration, r *Role) *queues {
	ctx, cancel := context.WithCancel(context.Background())
	return &queues{concurrency: concurrency, size: size, lease: lease, r: r,
		byID: map[string]*queue{}, held: map[heldKey]time.Time{}, ctx: ctx, cancel: cancel}
}

// hand queues a claimed message for its endpoint. A message this process holds already (the
// sweeper met it again) is ignored; one that does not fit is released.
func (q *queues) hand(m endpoint.Message) {
	k := heldKey{m.EndpointID, m.EventID}
	q.mu.Lock()
	if _, ok := q.held[k]; ok {
		q.mu.Unlock()
		return
	}
	eq := q.byID[m.EndpointID]
	if eq == nil {
		eq = &queue{}
		q.byID[m.EndpointID] = eq
	}
	if q.stopped || len(eq.msgs) >= q.size {
		q.mu.Unlock()
		q.release(m)
		return
	}
	q.held[k] = time.Now()
	eq.msgs = append(eq.msgs, m)
	if eq.workers < q.concurrency {
		eq.workers++
		q.wg.Add(1)
		go q.work(m.EndpointID, eq)
	}
	q.mu.Unlock()
}

// work sends the endpoint's messages one after the other until its queue is empty.
func (q *queues) work(id string, eq *queue) {
	defer q.wg.Done()
	for {
		m, claimed, ok := q.next(id, eq)
		if !ok {
			return
		}
		q.r.deliver(q.ctx, m, claimed)
		q.mu.Lock()
		delete(q.held, heldKey{m.EndpointID, m.EventID})
		q.mu.Unlock()
	}
}

func (q *queues) next(id string, eq *queue) (endpoint.Message, time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(eq.msgs) == 0 || q.stopped {
		eq.workers--
		if eq.workers == 0 && len(eq.msgs) == 0 {
			delete(q.byID, id)
		}
		return endpoint.Message{}, time.Time{}, false
	}
	m := eq.msgs[0]
	eq.msgs[0] = endpoint.Message{}
	eq.msgs = eq.msgs[1:]
	return m, q.held[heldKey{m.EndpointID, m.EventID}], true
}

// release hands a message back to PostgreSQL unsent.
func (q *queues) release(m endpoint.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := endpoint.Release(ctx, q.r.pool, m); err != nil {
		q.r.log.Warn("release webhook message", logFields(m, err)...)
	}
}

// stop lets the POSTs in flight finish within timeout, then cancels them, and hands back
// every message still queued.
func (q *queues) stop(timeout time.Duration) {
	q.mu.Lock()
	q.stopped = true
	var left []endpoint.Message
	for _, eq := range q.byID {
		left = append(left, eq.msgs...)
		eq.msgs = nil
	}
	q.mu.Unlock()
	for _, m := range left {
		q.release(m)
	}
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		q.cancel()
		<-done
	}
	q.cancel()
}
