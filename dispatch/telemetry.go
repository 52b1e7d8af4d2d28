package dispatch

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

const instrumentation = "github.com/heraldhq/herald/dispatch"

var tracer = otel.Tracer(instrumentation)

// metrics are dispatch's OTel instruments, taken from the global meter provider at New.
type metrics struct {
	sends     metric.Int64Counter     // attempts by outcome
	deferrals metric.Int64Counter     // rate-limit deferrals
	waits     metric.Float64Histogram // rate-limit wait in the lane, seconds
	lag       metric.Float64Histogram // record timestamp → processing start, seconds
}

func newMetrics() (*metrics, error) {
	m := otel.Meter(instrumentation)
	var (
		ms  metrics
		err error
	)
	if ms.sends, err = m.Int64Counter("herald.dispatch.sends",
		metric.WithDescription("Delivery attempts by outcome (SENT, TRANSIENT, PERMANENT, AMBIGUOUS, EXPIRED).")); err != nil {
		return nil, err
	}
	if ms.deferrals, err = m.Int64Counter("herald.dispatch.rate_limit.deferrals",
		metric.WithDescription("Deliveries deferred by a provider rate limit; no attempt used.")); err != nil {
		return nil, err
	}
	if ms.waits, err = m.Float64Histogram("herald.dispatch.rate_limit.wait", metric.WithUnit("s"),
		metric.WithDescription("Time a delivery waited in its lane for rate-limit capacity.")); err != nil {
		return nil, err
	}
	if ms.lag, err = m.Float64Histogram("herald.dispatch.lane.lag", metric.WithUnit("s"),
		metric.WithDescription("Time from a record's Kafka timestamp to the start of its processing, per lane.")); err != nil {
		return nil, err
	}
	return &ms, nil
}

// laneStats are per-lane counters that tests and operators read directly.
type laneStats struct {
	rateRefused atomic.Int64 // deliveries refused by the limiter at least once
	deferred    atomic.Int64 // deliveries deferred with next_attempt_at
	sends       atomic.Int64 // provider calls
	processed   atomic.Int64 // records handled
	stale       atomic.Int64 // admissions too old to use by the time of the call
	staleReads  atomic.Int64 // reads that did not yet see the row version a record was made from
}

// headerCarrier lets the W3C propagator read a Kafka record's headers.
type headerCarrier []kgo.RecordHeader

func (h headerCarrier) Get(key string) string {
	for _, hd := range h {
		if hd.Key == key {
			return string(hd.Value)
		}
	}
	return ""
}

func (h headerCarrier) Set(string, string) {}

func (h headerCarrier) Keys() []string {
	keys := make([]string, len(h))
	for i, hd := range h {
		keys[i] = hd.Key
	}
	return keys
}
