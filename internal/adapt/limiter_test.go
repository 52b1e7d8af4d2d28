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

// HIGH's target rises with the machine's calm latency: past Tolerance × calm when that is
// above the absolute target, past the absolute target otherwise.
func TestTargetsJudgeCalm(t *testing.T) {
	tg := Targets{HighLatency: 15 * time.Millisecond, Tolerance: 2}
	high := func(d time.Duration) Signal { return Signal{HighReports: 1, HighLatency: d} }
	const calm = 30 * time.Millisecond
	require.Equal(t, Clear, tg.JudgeCalm(high(55*time.Millisecond), calm), "under 2 × calm")
	require.Equal(t, Congested, tg.JudgeCalm(high(61*time.Millisecond), calm), "past 2 × calm")
	require.Equal(t, Congested, tg.JudgeCalm(high(16*time.Millisecond), 5*time.Millisecond), "a fast machine: the absolute target")
	require.Equal(t, Congested, tg.JudgeCalm(high(16*time.Millisecond), 0), "calm unknown: the absolute target")
	require.Equal(t, Clear, Targets{Tolerance: 3}.JudgeCalm(high(85*time.Millisecond), calm))
	require.Equal(t, Congested, Targets{}.JudgeCalm(high(55*time.Millisecond), calm), "by default the absolute target alone")
	require.Equal(t, Congested, tg.JudgeCalm(Signal{HighReports: 1, HighLatency: 20 * time.Millisecond,
		RelayReports: 1, RelayLag: time.Second}, calm), "the relay lag is judged on its own")
}

// The calm latency is the smallest signal of the last two minutes, once the window has held
// values for calmWarm; old buckets drop out, and an empty window starts its warm-up again.
func TestCalmLatency(t *testing.T) {
	c := newCalm()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for s := time.Duration(0); s < 40*time.Second; s += 250 * time.Millisecond {
		d := 40 * time.Millisecond
		if s == 10*time.Second {
			d = 22 * time.Millisecond
		}
		c.add(d, at(s))
	}
	fresh := newCalm()
	fresh.add(5*time.Millisecond, t0)
	require.Equal(t, time.Duration(0), fresh.latency(at(calmWarm-time.Second)), "warming up")
	require.Equal(t, 5*time.Millisecond, fresh.latency(at(calmWarm)))
	require.Equal(t, 22*time.Millisecond, c.latency(at(40*time.Second)), "the smallest")
	for s := 40 * time.Second; s < 135*time.Second; s += 250 * time.Millisecond {
		c.add(60*time.Millisecond, at(s))
	}
	require.Equal(t, 40*time.Millisecond, c.latency(at(135*time.Second)), "the 22 ms bucket has left the window")
	require.Equal(t, 60*time.Millisecond, c.latency(at(165*time.Second)))
	require.Equal(t, time.Duration(0), c.latency(at(10*time.Minute)), "nothing in the window")
	c.add(10*time.Millisecond, at(10*time.Minute))
	require.Equal(t, time.Duration(0), c.latency(at(10*time.Minute+time.Second)), "warming up again")
}
