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
