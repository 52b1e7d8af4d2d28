package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/semaphore"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/attrset"
)

// admission bounds the POST /api/notifications requests that do database work at once, so
// that a burst beyond what PostgreSQL takes is refused at once (503 overloaded) instead of
// queueing for a pool connection until clients time out, and so that a HIGH request never
// waits behind NORMAL or LOW ones.
//
// all has one slot per request that may work at once (Config.AdmissionSlots); shared has
// all's slots less the HIGH reserve. A HIGH request takes a slot of all only, waiting as
// long as its client does. A NORMAL or LOW request takes a slot of shared, then one of all,
// both within the queue wait; at most shared's capacity of them hold or wait for a slot of
// all, so the reserve is always left to HIGH.
//
// The wait counts from the request's arrival (admissionGate stamps it before anything else
// runs), and a NORMAL or LOW request that would not get a slot within what is left of it —
// the requests already waiting times the mean hold of a slot, over the slots they share — is
// refused at once ("shed") instead of at the end of the wait: under a burst the refusals cost
// neither the wait nor the CPU of a request that cannot be served.
type admission struct {
	all, shared *semaphore.Weighted
	sharedSlots int64
	wait        time.Duration
	waiting     atomic.Int64 // NORMAL and LOW requests waiting for a slot
	meanHold    atomic.Int64 // moving mean of how long a NORMAL or LOW request holds its slot, ns
	// read and insert estimate the accept's two database steps, for inTime
	// (admission_deadline.go).
	read, insert stepEstimate

	admissions metric.Int64Counter       // by priority and result
	inFlight   metric.Int64UpDownCounter // admitted requests holding a slot, by priority
}

// Admission results, the result attribute of herald.ingest.admissions.
const (
	admitted = "admitted" // the request got a slot
	refused  = "refused"  // no slot within the queue wait: 503 overloaded
	shed     = "shed"     // refused at once: no slot could come within what is left of the wait
	// late (admission_deadline.go): admitted, then refused before a database step it could
	// not finish by its answer-by time.
	canceled = "canceled" // the client went away while the request waited
)

func newAdmission(slots, highReserve int, wait time.Duration, meter metric.Meter) (*admission, error) {
	a := &admission{
		all:         semaphore.NewWeighted(int64(slots)),
		shared:      semaphore.NewWeighted(int64(slots - highReserve)),
		sharedSlots: int64(max(slots-highReserve, 1)),
		wait:        wait,
	}
	var err error
	if a.admissions, err = meter.Int64Counter("herald.ingest.admissions",
		metric.WithDescription("POST /api/notifications requests by priority and admission result (admitted, refused: "+
			"503 overloaded after the wait, shed: 503 overloaded at once because no slot could come within the wait, "+
			"late: admitted, then 503 overloaded before a database step it could not finish within the wait, "+
			"canceled: the client went away while waiting).")); err != nil {
		return nil, fmt.Errorf("ingest metrics: %w", err)
	}
	if a.inFlight, err = meter.Int64UpDownCounter("herald.ingest.accepts_in_flight",
		metric.WithDescription("POST /api/notifications requests holding an admission slot, by priority.")); err != nil {
		return nil, fmt.Errorf("ingest metrics: %w", err)
	}
	return a, nil
}

// The attribute sets of the admission metrics, built once per priority and result
// (internal/attrset): admission measures every request.
type admissionKey struct {
	priority herald.Priority
	result   string
}

var (
	priorityAttrs = attrset.New(func(p herald.Priority) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("priority", string(p))}
	})
	admissionAttrs = attrset.New(func(k admissionKey) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("priority", string(k.priority)), attribute.String("result", k.result)}
	})
)

// overloaded is the answer to a request refused for want of a slot. The client retries
// with the same Idempotency-Key after Retry-After.
func overloaded() *apiError {
	e := newAPIError(http.StatusServiceUnavailable, codeOverloaded,
		"the API is accepting all the notifications it can; retry with the same Idempotency-Key")
	e.retryAfter = "1"
	return e
}

// admit takes a slot for a request of priority p and returns the function that gives it
// back. The error is overloaded() when a NORMAL or LOW request got no slot within the queue
// wait since its arrival (or could not get one: errShed), or ctx's error when the client went
// away first.
func (a *admission) admit(ctx context.Context, p herald.Priority) (release func(), err error) {
	defer func() {
		result := admitted
		switch {
		case ctx.Err() != nil && err != nil:
			result = canceled
		case errors.Is(err, errShed):
			result, err = shed, overloaded()
		case err != nil:
			result = refused
		}
		a.admissions.Add(ctx, 1, admissionAttrs.Of(admissionKey{p, result}))
	}()
	if p == herald.PriorityHigh {
		if err := a.all.Acquire(ctx, 1); err != nil {
			return nil, fmt.Errorf("wait for an admission slot: %w", err)
		}
		return a.hold(p, a.all.Release), nil
	}
	deadline := arrivalFrom(ctx).Add(a.wait)
	if !a.shared.TryAcquire(1) {
		if err := a.queue(ctx, a.shared, deadline); err != nil {
			return nil, err
		}
	}
	if !a.all.TryAcquire(1) {
		if err := a.queue(ctx, a.all, deadline); err != nil {
			a.shared.Release(1)
			return nil, err
		}
	}
	took := time.Now()
	return a.hold(p, func(int64) {
		a.observeHold(time.Since(took))
		a.all.Release(1)
		a.shared.Release(1)
	}), nil
}

// errShed is admit's refusal of a request that could not get a slot in time: answered
// overloaded() like a refusal after the wait, counted apart.
var errShed = errors.New("no admission slot can come within the admission wait")

// queue waits for a slot of sem until deadline, or refuses at once (errShed) when the
// request could not be answered by then: the requests waiting ahead would hold the slots past
// it, counting the request's own hold (under a CPU-starved database an admitted request's
// accept takes long too, and its answer is bounded by the same wait).
func (a *admission) queue(ctx context.Context, sem *semaphore.Weighted, deadline time.Time) error {
	left := time.Until(deadline)
	ahead := a.waiting.Add(1)
	defer a.waiting.Add(-1)
	hold := a.meanHold.Load()
	if left <= 0 || time.Duration(ahead*hold/a.sharedSlots+hold) > left {
		return errShed
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := sem.Acquire(wctx, 1); err != nil {
		return a.waitError(ctx, err)
	}
	return nil
}

// observeHold moves the mean hold of a slot towards d (weight 1/8: the last few dozen holds).
func (a *admission) observeHold(d time.Duration) {
	for {
		old := a.meanHold.Load()
		next := old + (int64(d)-old)/8
		if a.meanHold.CompareAndSwap(old, next) {
			return
		}
	}
}

// waitError is the error of a NORMAL or LOW request whose wait ended with err.
func (a *admission) waitError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("wait for an admission slot: %w", err)
	}
	return overloaded()
}

// hold counts an admitted request in flight and returns its release.
func (a *admission) hold(p herald.Priority, release func(int64)) func() {
	attrs := priorityAttrs.Of(p)
	a.inFlight.Add(context.Background(), 1, attrs)
	return func() {
		a.inFlight.Add(context.Background(), -1, attrs)
		release(1)
	}
}
