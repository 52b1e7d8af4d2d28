package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// While the API is overloaded, a NORMAL or LOW POST is answered by its arrival plus the
// admission wait, whether it waited for a slot or got one at once: admission bounds the wait
// for a slot, and the accept's database steps are bounded by estimates of their duration.
// Before each step (the read of the accept context, then the insert) a request whose step
// would end past its answer-by time is answered 503 overloaded at once, as a refusal at
// admission is ("late"). Nothing is written: the check before the insert comes before the only
// write, and the insert, once started, runs to its end (cancelling it could leave a commit
// whose answer is lost). Under a database too slow to answer within the wait, NORMAL and LOW
// are refused rather than answered after seconds, which leaves the database to the requests
// that can still be answered in time. Overloaded means that a NORMAL or LOW request is waiting
// for a slot: an API with room for every request answers a slow accept late rather than
// refuse what it has room for, and so does an estimate of fewer than estimateWarm steps (a
// process's first accepts open the pool's connections, and their time says nothing of the
// accept's). HIGH has no answer-by time and is never refused this way.

// late is the admission result of a request admitted but answered 503 overloaded before a
// database step it could not finish in time.
const late = "late"

// answerBy is what the gate puts in an admitted NORMAL or LOW request's context.
type answerBy struct {
	at   time.Time
	prio herald.Priority
}

type answerByKey struct{}

// withAnswerBy gives a request of priority p its answer-by time, arrival plus the wait; HIGH
// gets none.
func (a *admission) withAnswerBy(ctx context.Context, p herald.Priority) context.Context {
	if p == herald.PriorityHigh {
		return ctx
	}
	return context.WithValue(ctx, answerByKey{}, answerBy{at: arrivalFrom(ctx).Add(a.wait), prio: p})
}

// inTime returns overloaded() when the request of ctx has an answer-by time that need from
// now would pass, and nil otherwise (HIGH, a request that did not pass the gate, or time enough).
func (a *admission) inTime(ctx context.Context, need time.Duration) error {
	by, ok := ctx.Value(answerByKey{}).(answerBy)
	if !ok || a.waiting.Load() == 0 || !time.Now().Add(need).After(by.at) {
		return nil
	}
	a.admissions.Add(ctx, 1, admissionAttrs.Of(admissionKey{by.prio, late}))
	return overloaded()
}

// estimateWarm is how many observations an estimate needs before it counts.
const estimateWarm = 8

// estimateFresh is how long an estimate counts after its last observation. Past it the
// estimate is 0 and the next request goes ahead (with every NORMAL request refused and no
// HIGH traffic, nothing else would observe that the database became fast again), and the
// next observation starts the estimate afresh.
const estimateFresh = time.Second

// stepEstimate is how long a database step of the accept takes: the moving mean and mean
// deviation of its durations (gains 1/8 and 1/4, as TCP's retransmission timer, RFC 6298),
// over every priority's accepts.
type stepEstimate struct {
	mu        sync.Mutex
	mean, dev time.Duration
	last      time.Time
	n         int // observations since the estimate started
}

// observe adds one duration of the step.
func (e *stepEstimate) observe(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if time.Since(e.last) > estimateFresh { // the first, or the first since the estimate went stale
		e.mean, e.dev, e.n = d, d/2, 0
	} else {
		diff := d - e.mean
		e.mean += diff / 8
		e.dev += (diff.Abs() - e.dev) / 4
	}
	e.last = time.Now()
	e.n++
}

// bound is the time the step is expected to take at most, mean + 4 deviations; 0 when no
// step was observed within estimateFresh, or fewer than estimateWarm.
func (e *stepEstimate) bound() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if time.Since(e.last) > estimateFresh || e.n < estimateWarm {
		return 0
	}
	return e.mean + 4*e.dev
}

// timed runs step and, when it succeeds, observes its duration in e.
func timed[T any](e *stepEstimate, step func() (T, error)) (T, error) {
	began := time.Now()
	v, err := step()
	if err == nil {
		e.observe(time.Since(began))
	}
	return v, err
}
