package route

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/stacktest"
)

// collect returns the points of the instrument name as "account/standby[/reason]" → value.
func collect(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]float64{}
	key := func(s attribute.Set) string {
		k := ""
		for _, a := range []attribute.Key{"account", "standby", "reason"} {
			if v, ok := s.Value(a); ok {
				k += "/" + v.AsString()
			}
		}
		return k[1:]
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(p.Attributes)] += float64(p.Value)
				}
			}
		}
	}
	return out
}

// The share and health gauges follow the shared health, the decisions counter names the
// account and the reason of every routed attempt. The test installs the process's meter
// provider, so it does not run in parallel.
func TestMetricsShareAndDecisions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(prev)
		_ = mp.Shutdown(context.Background())
	})
	rdb, prefix := stacktest.Redis(t)
	cfg := fast()
	cfg.ProbeInterval = 60e9
	p := newPair(t, cfg, rdb, prefix)
	require.Equal(t, map[string]float64{"sms:twilio/false": 1, "sms:vonage/true": 0}, collect(t, reader, "herald.route.share"))

	p.out.down.Store(true)
	for range cfg.MinFailures {
		p.send(t, herald.PriorityNormal, "", "")
	}
	require.Equal(t, []int{1, 0}, p.levels(t))
	require.Equal(t, map[string]float64{"sms:twilio/false": 0.75, "sms:vonage/true": 0.25}, collect(t, reader, "herald.route.share"))
	require.Equal(t, map[string]float64{"sms:twilio/false": 1, "sms:vonage/true": 0}, collect(t, reader, "herald.route.health_level"))
	p.send(t, herald.PriorityHigh, "sms:twilio", "TRANSIENT")
	d := collect(t, reader, "herald.route.decisions")
	require.Equal(t, float64(cfg.MinFailures), d["sms:twilio/false/weight"])
	require.Equal(t, float64(1), d["sms:vonage/true/failover"])
	require.Equal(t, map[string]float64{"sms:twilio": 1}, collect(t, reader, "herald.route.steps"), "one step down")
}
