package adapt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A congested signal shrinks the limit multiplicatively down to the floor, a clear one grows
// it additively back to the ceiling, and no signal puts it at the ceiling at once.
func TestLimiterAIMD(t *testing.T) {
	l := NewLimiter("dispatch.low", 20)
	require.Equal(t, 20, l.Limit())
	l.Step(Congested)
	require.Equal(t, 14, l.Limit()) // 20 × 0.7
	l.Step(Congested)
	require.Equal(t, 9, l.Limit()) // 9.8
	for range 10 {
		l.Step(Congested)
	}
	require.Equal(t, 2, l.Limit(), "floor: 10 % of the ceiling")
	l.Step(Clear)
	require.Equal(t, 4, l.Limit(), "+10 % of the ceiling per step")
	for range 20 {
		l.Step(Clear)
	}
	require.Equal(t, 20, l.Limit(), "never past the ceiling")
	l.Step(Congested)
	l.Step(Congested)
	l.Step(Unknown)
	require.Equal(t, 20, l.Limit(), "no signal: the ceiling")
}

// A small ceiling still moves by whole workers and never goes below one.
func TestLimiterSmallCeiling(t *testing.T) {
	l := NewLimiter("dispatch.low", 2)
	l.Step(Congested)
	require.Equal(t, 1, l.Limit())
	l.Step(Congested)
	require.Equal(t, 1, l.Limit())
	l.Step(Clear)
	require.Equal(t, 2, l.Limit())
	require.Equal(t, 1, NewLimiter("x", 0).Limit(), "a ceiling below 1 counts as 1")
}

// Changed holds one notice after a change, none when a step left the limit as it was.
func TestLimiterChanged(t *testing.T) {
	l := NewLimiter("x", 10)
	l.Step(Clear) // at the ceiling already: no change
	require.Len(t, l.Changed(), 0)
	l.Step(Congested)
	l.Step(Congested)
	require.Len(t, l.Changed(), 1, "one pending notice, however many changes")
	<-l.Changed()
	l.Step(Unknown)
	require.Len(t, l.Changed(), 1)
}

func TestTargetsJudge(t *testing.T) {
	tg := Targets{HighLatency: 20 * time.Millisecond, RelayLag: 100 * time.Millisecond}
	for _, c := range []struct {
		name string
		s    Signal
		want Verdict
	}{
		{"no report", Signal{}, Unknown},
		{"HIGH within", Signal{HighReports: 1, HighLatency: 20 * time.Millisecond}, Clear},
		{"HIGH past", Signal{HighReports: 2, HighLatency: 21 * time.Millisecond}, Congested},
		{"relay within", Signal{RelayReports: 1, RelayLag: 90 * time.Millisecond}, Clear},
		{"relay past", Signal{RelayReports: 1, RelayLag: 101 * time.Millisecond, HighReports: 1}, Congested},
		{"a latency without its report does not count", Signal{HighLatency: time.Second, RelayReports: 1}, Clear},
	} {
		require.Equal(t, c.want, tg.Judge(c.s), c.name)
	}
	require.Equal(t, Congested, Targets{}.Judge(Signal{HighReports: 1, HighLatency: DefaultHighLatency + 1}), "defaults")
}

func TestWindowQuantile(t *testing.T) {
	var w window
	_, ok := w.take()
	require.False(t, ok)
	for i := 1; i <= 5; i++ {
		w.add(time.Duration(i) * time.Millisecond)
	}
	q, ok := w.take()
	require.True(t, ok)
	require.Equal(t, 5*time.Millisecond, q, "fewer than ten: the largest")
	for i := 100; i >= 1; i-- {
		w.add(time.Duration(i) * time.Millisecond)
	}
	q, _ = w.take()
	require.Equal(t, 90*time.Millisecond, q, "the 90th percentile, one outlier in ten ignored")
	_, ok = w.take()
	require.False(t, ok, "take empties the window")
}
