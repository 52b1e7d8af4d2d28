package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// points returns the data points of the instrument named name as attribute set → value (a
// sum's value, a histogram's count, a gauge's value).
func points(t *testing.T, reader *sdkmetric.ManualReader, name string) map[attribute.Distinct]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[attribute.Distinct]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[p.Attributes.Equivalent()] += float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[p.Attributes.Equivalent()] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[p.Attributes.Equivalent()] += float64(p.Count)
				}
			}
		}
	}
	return out
}

func attrs(kv ...string) attribute.Distinct {
	var list []attribute.KeyValue
	for i := 0; i < len(kv); i += 2 {
		list = append(list, attribute.String(kv[i], kv[i+1]))
	}
	set := attribute.NewSet(list...)
	return set.Equivalent()
}

// TestFinalOutcomesCountedOnceApartFromAttempts: a delivery that fails twice before it goes
// through and one that fails for good are two final outcomes (sent, failed) and four
// attempts; the provider saw four calls, three of them failed; the accept → call latency
// counts each delivery's first attempt only. The test installs the process's meter
// provider, so it does not run in parallel.
func TestFinalOutcomesCountedOnceApartFromAttempts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetMeterProvider(prev)
		_ = mp.Shutdown(context.Background())
	})

	e := newEnv(t)
	cfg := e.config()
	cfg.RetryPolicies = map[herald.Channel]RetryPolicy{herald.ChannelSMS: {Base: 50 * time.Millisecond, Max: 100 * time.Millisecond, MaxAttempts: 5}}
	cfg.LagInterval = 100 * time.Millisecond
	e.sweep()
	// Inserted before the dispatcher starts: its goroutines read broken.
	flaky, broken := e.insert(fixture{}), e.insert(fixture{})
	s := &MemorySender{ProviderName: "sms:test", Behave: func(_ context.Context, m *senders.Message, call int) (senders.Result, error) {
		switch {
		case m.DeliveryID == broken:
			return senders.Result{}, senders.PermanentError("21211", errors.New("invalid number"))
		case call <= 2:
			return senders.Result{}, senders.TransientError("503", 0, errors.New("unavailable"))
		}
		return senders.Result{ProviderMessageID: "SM1"}, nil
	}}
	e.start(cfg, nil, smsOnly(s))
	e.publish(flaky, broken)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, flaky)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusFailed}, broken)

	high := []string{"channel", "SMS", "priority", "HIGH"}
	with := func(kv ...string) attribute.Distinct { return attrs(append(append([]string(nil), high...), kv...)...) }
	require.Eventually(t, func() bool { // the last outcome is counted right after its write
		return len(points(t, reader, "herald.deliveries")) == 2
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, map[attribute.Distinct]float64{
		with("outcome", "sent", "provider", "sms:test"):   1,
		with("outcome", "failed", "provider", "sms:test"): 1,
	}, points(t, reader, "herald.deliveries"))
	require.Equal(t, map[attribute.Distinct]float64{
		with("outcome", "TRANSIENT"): 2,
		with("outcome", "SENT"):      1,
		with("outcome", "PERMANENT"): 1,
	}, points(t, reader, "herald.dispatch.sends"))
	require.Equal(t, map[attribute.Distinct]float64{
		attrs("provider", "sms:test", "channel", "SMS", "outcome", "transient"): 2,
		attrs("provider", "sms:test", "channel", "SMS", "outcome", "permanent"): 1,
		attrs("provider", "sms:test", "channel", "SMS", "outcome", "ok"):        1,
	}, points(t, reader, "herald.provider.call.duration"))
	require.Equal(t, map[attribute.Distinct]float64{
		attrs("provider", "sms:test", "channel", "SMS", "class", "transient"): 2,
		attrs("provider", "sms:test", "channel", "SMS", "class", "permanent"): 1,
	}, points(t, reader, "herald.provider.call.errors"))
	require.Equal(t, map[attribute.Distinct]float64{with("provider", "sms:test"): 2},
		points(t, reader, "herald.dispatch.accept_to_call"))
	require.Equal(t, map[attribute.Distinct]float64{attrs(): 0}, points(t, reader, "herald.dispatch.redis.degraded"))
	require.Eventually(t, func() bool {
		lag, ok := points(t, reader, "herald.dispatch.consumer_lag_records")[attrs("priority", "HIGH")]
		return ok && lag == 0 // both records committed
	}, 10*time.Second, 20*time.Millisecond)
}
