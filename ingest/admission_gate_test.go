package ingest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
)

// A NORMAL or LOW request that cannot get a slot within what is left of its wait is refused
// at once (shed), not at the end of the wait: when the requests ahead of it would hold the
// slots past the wait, and when its wait, counted from its arrival, is already over.
func TestAdmissionShedsWhatCannotBeServed(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	a, err := newAdmission(4, 1, time.Hour, meter)
	require.NoError(t, err)
	a.holdSlots(t, herald.PriorityNormal, 3)

	// The slots are held for four hours on average: no NORMAL slot can come within the hour.
	a.meanHold.Store(int64(4 * time.Hour))
	_, err = a.admit(context.Background(), herald.PriorityLow)
	var ae *apiError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, codeOverloaded, ae.code)
	require.Equal(t, "1", ae.retryAfter)

	// Short holds, but the request arrived an hour ago: its wait is over.
	a.meanHold.Store(int64(time.Millisecond))
	arrived := context.WithValue(context.Background(), arrivalKey{}, time.Now().Add(-time.Hour))
	_, err = a.admit(arrived, herald.PriorityNormal)
	require.ErrorAs(t, err, &ae)

	// HIGH is not shed: the reserved slot is free.
	release, err := a.admit(context.Background(), herald.PriorityHigh)
	require.NoError(t, err)
	release()
	got := sums(t, reader, "herald.ingest.admissions")
	require.Equal(t, int64(1), got["priority=LOW,result=shed"], "%v", got)
	require.Equal(t, int64(1), got["priority=NORMAL,result=shed"], "%v", got)
	require.Zero(t, got["priority=NORMAL,result=refused"]+got["priority=LOW,result=refused"], "nothing waited for the hour")
}

// The mean hold follows what the slots are held for.
func TestAdmissionMeanHold(t *testing.T) {
	a, err := newAdmission(2, 1, time.Second, sdkmetric.NewMeterProvider().Meter("test"))
	require.NoError(t, err)
	for range 100 {
		a.observeHold(80 * time.Millisecond)
	}
	require.InDelta(t, float64(80*time.Millisecond), float64(a.meanHold.Load()), float64(time.Millisecond))
}

// Over HTTP, with admission full: a NORMAL POST is answered 503 overloaded with Retry-After
// at once although the admission wait is an hour (it could not be served within it), and
// writes nothing; a HIGH POST is accepted meanwhile. Were the wait not cut short, the POST
// would hang for the hour and the test fail at its 10 s bound.
func TestPostShedWhileHighAccepted(t *testing.T) {
	e := newEnvWith(t, Config{AdmissionSlots: 3, AdmissionHighReserve: 1, AdmissionWait: time.Hour}, zaptest.NewLogger(t))
	e.template("otp", "security", "SMS")
	e.user(7, map[string]any{"phone": "+15551234567"})
	e.api.admit.holdSlots(t, herald.PriorityNormal, 2)
	e.api.admit.meanHold.Store(int64(4 * time.Hour))

	answered := make(chan response, 1)
	go func() {
		res, err := e.postAsync("k-normal", `{"userId":7,"template":"otp","channels":["SMS"],"priority":"NORMAL"}`)
		if err != nil {
			res.status = -1
		}
		answered <- res
	}()
	var res response
	select {
	case res = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the NORMAL POST waited for a slot that could not come within the admission wait")
	}
	requireProblem(t, res, http.StatusServiceUnavailable, codeOverloaded)
	require.Equal(t, "1", res.header.Get("Retry-After"))
	n, d := e.rows()
	require.Zero(t, n+d, "a refused request writes nothing")

	res = e.post("k-high", `{"userId":7,"template":"otp","channels":["SMS"],"priority":"HIGH"}`)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
}

// The gate reads the priority as the full decode does; a body it cannot read is NORMAL, the
// default, and the full decode then refuses it.
func TestSniffPriority(t *testing.T) {
	for body, want := range map[string]herald.Priority{
		`{"priority":"HIGH","userId":7}`:                   herald.PriorityHigh,
		`{"userId":7,"payload":{"priority":"HIGH"}}`:       herald.PriorityNormal,
		`{"priority":"LOW"}`:                               herald.PriorityLow,
		`{"priority":"URGENT"}`:                            herald.PriorityNormal,
		`{"priority":"HIGH"`:                               herald.PriorityNormal,
		`{"priority":"LOW","priority":"HIGH"}`:             herald.PriorityHigh,
		`not json`:                                         herald.PriorityNormal,
		`{"userId":7,"template":"otp","channels":["SMS"]}`: herald.PriorityNormal,
	} {
		require.Equal(t, want, sniffPriority([]byte(body)), body)
	}
}

// While the API is overloaded (a request waits for a slot), an admitted NORMAL or LOW POST is
// answered 503 overloaded at once, writing nothing, when its database steps could not finish by
// its answer-by time (arrival plus the admission wait): reads estimated at two hours, then
// inserts. HIGH has no answer-by time and is accepted meanwhile; with nobody waiting, and once
// the estimate is stale, NORMAL goes ahead (the refused request, repeated with its
// Idempotency-Key). With an hour's wait, a POST that went ahead regardless would be accepted,
// and the test fail.
func TestAdmittedPostRefusedBeforeAStepItCannotFinish(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	otelMeter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	e := newEnvWith(t, Config{AdmissionSlots: 4, AdmissionHighReserve: 1, AdmissionWait: time.Hour}, zaptest.NewLogger(t))
	admit, err := newAdmission(4, 1, time.Hour, otelMeter.Meter("test"))
	require.NoError(t, err)
	e.api.admit = admit
	e.template("otp", "security", "SMS")
	e.user(7, map[string]any{"phone": "+15551234567"})
	const normal = `{"userId":7,"template":"otp","channels":["SMS"],"priority":"NORMAL"}`
	stale := func(e *stepEstimate) {
		e.mu.Lock()
		e.last = time.Now().Add(-2 * estimateFresh)
		e.mu.Unlock()
	}

	observe := func(e *stepEstimate, d time.Duration) {
		for range estimateWarm {
			e.observe(d)
		}
	}
	admit.waiting.Store(1)            // a request waits for a slot: the API is overloaded
	observe(&admit.read, 2*time.Hour) // reads take two hours: refused before the read
	requireProblem(t, e.post("k-1", normal), http.StatusServiceUnavailable, codeOverloaded)
	stale(&admit.read)
	observe(&admit.insert, 2*time.Hour) // inserts take two hours
	res := e.post("k-2", normal)
	requireProblem(t, res, http.StatusServiceUnavailable, codeOverloaded)
	require.Equal(t, "1", res.header.Get("Retry-After"))
	n, d := e.rows()
	require.Zero(t, n+d, "a request refused for want of time writes nothing")

	res = e.post("k-high", `{"userId":7,"template":"otp","channels":["SMS"],"priority":"HIGH"}`)
	require.Equal(t, http.StatusAccepted, res.status, "HIGH has no answer-by time: %s", res.body)

	admit.waiting.Store(0) // nobody waits: a slow accept is answered late, not refused
	res = e.post("k-3", normal)
	require.Equal(t, http.StatusAccepted, res.status, "an API with room refuses nothing: %s", res.body)
	admit.waiting.Store(1)
	stale(&admit.insert)
	res = e.post("k-2", normal)
	require.Equal(t, http.StatusAccepted, res.status, "a stale estimate lets the request go ahead: %s", res.body)
	got := sums(t, reader, "herald.ingest.admissions")
	require.Equal(t, int64(2), got["priority=NORMAL,result=late"], "%v", got)
	require.Equal(t, int64(4), got["priority=NORMAL,result=admitted"], "%v", got)
}
