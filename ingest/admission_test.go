package ingest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
)

// sums returns the int64 sum points of the instrument named name as "k=v,k=v" → value.
func sums(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range d.DataPoints {
					out[string(p.Attributes.Encoded(attribute.DefaultEncoder()))] = p.Value
				}
			}
		}
	}
	return out
}

// holdSlots takes n slots for priority p and gives them back at the end of the test, or
// earlier through the returned releases.
func (a *admission) holdSlots(t *testing.T, p herald.Priority, n int) []func() {
	t.Helper()
	var rel []func()
	for range n {
		release, err := a.admit(context.Background(), p)
		require.NoError(t, err)
		release = sync.OnceFunc(release)
		t.Cleanup(release)
		rel = append(rel, release)
	}
	return rel
}

// With the NORMAL slots taken, a HIGH request is admitted at once and a NORMAL or LOW one is
// refused after the queue wait; a slot given back admits a waiting NORMAL request.
func TestAdmissionReservesSlotsForHigh(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	const wait = 100 * time.Millisecond
	a, err := newAdmission(4, 1, wait, meter)
	require.NoError(t, err)
	held := a.holdSlots(t, herald.PriorityNormal, 3)

	// One slot is free, but it is HIGH's: NORMAL and LOW are refused after the queue wait.
	for _, p := range []herald.Priority{herald.PriorityNormal, herald.PriorityLow} {
		start := time.Now()
		_, err := a.admit(context.Background(), p)
		var ae *apiError
		require.ErrorAs(t, err, &ae, "%s", p)
		require.Equal(t, codeOverloaded, ae.code)
		require.Equal(t, http.StatusServiceUnavailable, ae.status)
		require.Equal(t, "1", ae.retryAfter)
		require.GreaterOrEqual(t, time.Since(start), wait, "%s is refused only after the queue wait", p)
	}

	// HIGH: admitted at once to the slot NORMAL and LOW could not take. The deadline only
	// keeps a broken admission from hanging.
	ctx, cancel := context.WithTimeout(context.Background(), wait/2)
	defer cancel()
	releaseHigh, err := a.admit(ctx, herald.PriorityHigh)
	require.NoError(t, err, "a HIGH request takes the reserved slot without waiting")

	// Every slot taken: a HIGH request waits as long as its client, then gives up.
	ctx, cancel = context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	_, err = a.admit(ctx, herald.PriorityHigh)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	releaseHigh()

	// A NORMAL request waiting for a slot is admitted when one is given back.
	patient, err := newAdmission(2, 1, time.Minute, meter)
	require.NoError(t, err)
	first := patient.holdSlots(t, herald.PriorityNormal, 1)
	got := make(chan error, 1)
	go func() {
		release, err := patient.admit(context.Background(), herald.PriorityNormal)
		if err == nil {
			release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("NORMAL admitted while the only NORMAL slot was held: %v", err)
	default:
	}
	first[0]()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting NORMAL request was not admitted after a slot was given back")
	}
	held[0]()

	require.Equal(t, map[string]int64{
		"priority=NORMAL,result=admitted": 5, "priority=HIGH,result=admitted": 1,
		"priority=NORMAL,result=refused": 1, "priority=LOW,result=refused": 1, "priority=HIGH,result=canceled": 1,
	}, sums(t, reader, "herald.ingest.admissions"))
	require.Equal(t, map[string]int64{"priority=NORMAL": 2, "priority=HIGH": 0},
		sums(t, reader, "herald.ingest.accepts_in_flight"), "two NORMAL slots of a are still held")
}

// Over its NORMAL slots the API answers a NORMAL or LOW POST 503 overloaded with Retry-After
// and writes nothing; a HIGH POST is accepted; the refused request, repeated with its
// Idempotency-Key once a slot is free, is accepted.
func TestPostRefusedWhenOverloaded(t *testing.T) {
	e := newEnvWith(t, Config{AdmissionSlots: 3, AdmissionHighReserve: 1, AdmissionWait: 50 * time.Millisecond}, zaptest.NewLogger(t))
	e.template("otp", "security", "SMS")
	e.user(7, map[string]any{"phone": "+15551234567"})
	held := e.api.admit.holdSlots(t, herald.PriorityLow, 2)

	for _, p := range []string{"NORMAL", "LOW"} {
		res := e.post("k-"+p, `{"userId":7,"template":"otp","channels":["SMS"],"priority":"`+p+`"}`)
		requireProblem(t, res, http.StatusServiceUnavailable, codeOverloaded)
		require.Equal(t, "1", res.header.Get("Retry-After"))
	}
	n, d := e.rows()
	require.Equal(t, 0, n, "a refused request writes no notification")
	require.Equal(t, 0, d, "a refused request writes no delivery")

	res := e.post("k-high", `{"userId":7,"template":"otp","channels":["SMS"],"priority":"HIGH"}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)

	held[0]()
	res = e.post("k-NORMAL", `{"userId":7,"template":"otp","channels":["SMS"],"priority":"NORMAL"}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	n, d = e.rows()
	require.Equal(t, 2, n)
	require.Equal(t, 2, d)
}

func TestAdmissionConfig(t *testing.T) {
	for _, tc := range []struct {
		in, want  Config
		poolConns int
		err       string
	}{
		{poolConns: 32, want: Config{AdmissionSlots: 32, AdmissionHighReserve: 8, AdmissionWait: DefaultAdmissionWait}},
		{poolConns: 3, want: Config{AdmissionSlots: 3, AdmissionHighReserve: 1, AdmissionWait: DefaultAdmissionWait}},
		{poolConns: 1, want: Config{AdmissionSlots: 1, AdmissionHighReserve: 0, AdmissionWait: DefaultAdmissionWait}},
		{poolConns: 32, in: Config{AdmissionSlots: 10, AdmissionWait: time.Second},
			want: Config{AdmissionSlots: 10, AdmissionHighReserve: 2, AdmissionWait: time.Second}},
		{poolConns: 32, in: Config{AdmissionSlots: 4, AdmissionHighReserve: 4}, err: "AdmissionHighReserve 4"},
		{poolConns: 32, in: Config{AdmissionSlots: -1}, err: "AdmissionSlots -1"},
		{poolConns: 32, in: Config{AdmissionWait: -time.Second}, err: "AdmissionWait -1s"},
	} {
		c := tc.in
		c = c.withDefaults(tc.poolConns)
		err := c.validate()
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, Config{AdmissionSlots: c.AdmissionSlots, AdmissionHighReserve: c.AdmissionHighReserve,
			AdmissionWait: c.AdmissionWait})
	}
}
