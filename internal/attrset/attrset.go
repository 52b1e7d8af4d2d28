// Package attrset keeps OpenTelemetry attribute sets by the values of their labels, so that
// a measurement on a hot path does not build, sort and hash its set again every time, as
// metric.WithAttributes does (docs/operations.md, "Metrics on the hot path").
package attrset

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Cache holds the measurement option of each key's attribute set. K's values must come from
// bounded sets (a priority, a channel, a provider, an outcome), as a metric's labels must.
type Cache[K comparable] struct {
	build func(K) []attribute.KeyValue
	sets  sync.Map // K → metric.MeasurementOption
}

// New returns a cache whose sets build makes from a key.
func New[K comparable](build func(K) []attribute.KeyValue) *Cache[K] {
	return &Cache[K]{build: build}
}

// Of is the measurement option (for Add and Record alike) of k's attribute set.
func (c *Cache[K]) Of(k K) metric.MeasurementOption {
	if o, ok := c.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := c.sets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(c.build(k)...)))
	return o.(metric.MeasurementOption)
}
