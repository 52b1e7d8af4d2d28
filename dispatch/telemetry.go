package dispatch

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/attrset"
	"github.com/heraldhq/herald/internal/delivery"
)

const instrumentation = "github.com/heraldhq/herald/dispatch"

var tracer = otel.Tracer(instrumentation)

// metrics are dispatch's OTel instruments, taken from the global meter provider at New.
type metrics struct {
	sends     metric.Int64Counter     // attempts by outcome
	deferrals metric.Int64Counter     // rate-limit deferrals
	waits     metric.Float64Histogram // rate-limit wait in the lane, seconds
	lag       metric.Float64Histogram // record timestamp → processing start, seconds

	acceptToCall metric.Float64Histogram // accept → first provider call, seconds
	calls        metric.Float64Histogram // provider call duration by outcome, seconds
	callErrors   metric.Int64Counter     // failed provider calls by class

	adapt *adapt.Controller // told HIGH's accept → call latencies; nil: nobody listens
}

// acceptToCallBuckets cover a HIGH delivery's path from the API to the provider: tens of
// milliseconds when all is well, seconds under a rate limit, minutes in an outage.
var acceptToCallBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 300}

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
	if ms.acceptToCall, err = m.Float64Histogram("herald.dispatch.accept_to_call", metric.WithUnit("s"),
		metric.WithDescription("Time from the API's accept (the delivery row's created_at) to the start of the first attempt's provider call."),
		metric.WithExplicitBucketBoundaries(acceptToCallBuckets...)); err != nil {
		return nil, err
	}
	if ms.calls, err = m.Float64Histogram("herald.provider.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Provider calls by provider, channel and outcome (ok, transient, permanent, ambiguous)."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)); err != nil {
		return nil, err
	}
	if ms.callErrors, err = m.Int64Counter("herald.provider.call.errors",
		metric.WithDescription("Failed provider calls by provider, channel and error class (transient, permanent, ambiguous).")); err != nil {
		return nil, err
	}
	return &ms, nil
}

// sendAttrs are an attempt's labels: outcome, channel, priority.
var sendAttrs = attrset.New(func(k [3]string) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("outcome", k[0]), attribute.String("channel", k[1]),
		attribute.String("priority", k[2])}
})

// ended counts an attempt's outcome (an attempt outcome, or GAVE_UP) and, when status is
// final, the delivery's final outcome. Call it once the transition was written.
func (l *lane) ended(ctx context.Context, r *row, outcome herald.AttemptOutcome, status herald.Status, provider string) {
	l.d.metrics.sends.Add(ctx, 1, sendAttrs.Of([3]string{string(outcome), string(r.Channel), string(l.prio)}))
	if status.Terminal() {
		delivery.CountFinal(ctx, delivery.Final{Status: status, Channel: r.Channel, Priority: l.prio, Provider: provider}, 1)
	}
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
