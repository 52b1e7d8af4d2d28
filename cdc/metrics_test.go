package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/heraldhq/herald"
)

// TestRelayMetrics installs a meter provider for the whole process: it does not run in
// parallel, so that the instruments of this test's relay are the ones read.
func TestRelayMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(prev)
		_ = mp.Shutdown(context.Background())
	})

	h := newHarness(t, nil)
	h.startRelay(h.cfg)
	ids := h.insert(rows{n: 20, priority: herald.PriorityHigh})
	future := h.insert(rows{n: 1, priority: herald.PriorityLow, dueIn: time.Second})
	h.waitAll(append(ids, future...), time.Minute)

	find := func(name string) (metricdata.Metrics, bool) {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == name {
					return m, true
				}
			}
		}
		return metricdata.Metrics{}, false
	}
	eventually(t, 10*time.Second, func() bool {
		m, ok := find("herald.cdc.commit_to_publish")
		if !ok {
			return false
		}
		var n uint64
		for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			n += dp.Count
		}
		return n >= 20
	}, "commit_to_publish did not count the stream's records")
	eventually(t, 10*time.Second, func() bool {
		m, ok := find("herald.cdc.sweeper.published")
		if !ok {
			return false
		}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			if dp.Value >= 1 {
				return true
			}
		}
		return false
	}, "the sweeper's count did not move")
	eventually(t, 10*time.Second, func() bool { _, ok := find("herald.cdc.slot_lag"); return ok }, "no slot lag")
	m, ok := find("herald.cdc.leader")
	require.True(t, ok)
	require.EqualValues(t, 1, m.Data.(metricdata.Gauge[int64]).DataPoints[0].Value)
}
