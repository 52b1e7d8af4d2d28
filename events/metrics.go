package events

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/heraldhq/herald/internal/endpoint"
)

const instrumentation = "github.com/heraldhq/herald/events"

// lagBuckets cover an event's way from its commit to an endpoint's 2xx: tens of milliseconds
// when all is well, the retry schedule's steps when an endpoint fails.
var lagBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 86400}

// metrics are the events role's instruments (docs/operations.md lists them).
type metrics struct {
	messages metric.Int64Counter     // final outcomes of messages: delivered, dropped
	retries  metric.Int64Counter     // attempts that will be tried again
	disabled metric.Int64Counter     // endpoints disabled by a 410
	skipped  metric.Int64Counter     // records that are no status event
	lag      metric.Float64Histogram // event occurred → endpoint answered 2xx

	mu      sync.Mutex
	failing map[string]time.Time // endpoint id → failing since, read every HealthInterval
}

func newMetrics() (*metrics, error) {
	m := otel.Meter(instrumentation)
	ms := &metrics{failing: map[string]time.Time{}}
	var err error
	if ms.messages, err = m.Int64Counter("herald.webhooks.messages",
		metric.WithDescription("Events finished per endpoint by result: delivered (a 2xx) or dropped (a final 4xx, a blocked address, the retry schedule ran out).")); err != nil {
		return nil, err
	}
	if ms.retries, err = m.Int64Counter("herald.webhooks.retries",
		metric.WithDescription("Failed endpoint attempts (network error, 5xx, 429) that will be tried again.")); err != nil {
		return nil, err
	}
	if ms.disabled, err = m.Int64Counter("herald.webhooks.endpoints.disabled",
		metric.WithDescription("Endpoints disabled because they answered 410 Gone.")); err != nil {
		return nil, err
	}
	if ms.skipped, err = m.Int64Counter("herald.webhooks.records.skipped",
		metric.WithDescription("Records on the events topic that are no herald status event.")); err != nil {
		return nil, err
	}
	if ms.lag, err = m.Float64Histogram("herald.webhooks.lag", metric.WithUnit("s"),
		metric.WithDescription("Time from an event's occurrence (its commit) to the endpoint's 2xx."),
		metric.WithExplicitBucketBoundaries(lagBuckets...)); err != nil {
		return nil, err
	}
	failing, err := m.Float64ObservableGauge("herald.webhooks.endpoint.failing_since", metric.WithUnit("s"),
		metric.WithDescription("Unix time of the first failed attempt since the last success, per failing endpoint (absent when healthy)."))
	if err != nil {
		return nil, err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		for id, since := range ms.failing {
			o.ObserveFloat64(failing, float64(since.UnixMilli())/1000, metric.WithAttributes(attribute.String("endpoint_id", id)))
		}
		return nil
	}, failing)
	return ms, err
}

var (
	resultDelivered = metric.WithAttributes(attribute.String("result", "delivered"))
	resultDropped   = metric.WithAttributes(attribute.String("result", "dropped"))
)

// outcome counts one recorded attempt.
func (ms *metrics) outcome(ctx context.Context, r endpoint.Result, m endpoint.Message) {
	switch r {
	case endpoint.ResultDelivered:
		ms.messages.Add(ctx, 1, resultDelivered)
		ms.lag.Record(ctx, time.Since(m.OccurredAt).Seconds())
	case endpoint.ResultDropped:
		ms.messages.Add(ctx, 1, resultDropped)
	case endpoint.ResultRetry:
		ms.retries.Add(ctx, 1)
	}
}

func (ms *metrics) setFailing(f map[string]time.Time) {
	ms.mu.Lock()
	ms.failing = f
	ms.mu.Unlock()
}
