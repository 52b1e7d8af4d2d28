package pace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPacerSpacesLotsToTheRate(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var p Pacer
	// 1,000 rows at 5,000/s take 200 ms of budget: a lot that took 60 ms waits 140 ms.
	require.Equal(t, 140*time.Millisecond, p.Wait(ms(0), ms(60), 1000, 5000))
	// The next lot started on time and took 250 ms: it is late, no wait.
	require.Equal(t, time.Duration(0), p.Wait(ms(200), ms(450), 1000, 5000))
	// Being late gives no credit beyond the lot: the one after starts when its budget ends.
	require.Equal(t, 150*time.Millisecond, p.Wait(ms(450), ms(500), 1000, 5000))
	// After an idle hour, the first lot is paced from its own start.
	require.Equal(t, 190*time.Millisecond, p.Wait(t0.Add(time.Hour), t0.Add(time.Hour+10*time.Millisecond), 1000, 5000))
	// Unpaced, and a lot that wrote nothing (all suppressed), never wait.
	require.Equal(t, time.Duration(0), p.Wait(ms(0), ms(1), 1000, -1))
	require.Equal(t, time.Duration(0), p.Wait(t0.Add(2*time.Hour), t0.Add(2*time.Hour), 0, 5000))
}

// A pause worked out again at a new rate gives the last lot's budget at that rate: sooner
// when the rate grew, later when it shrank, at once when the work became unpaced; a lot that
// was not paced stays unpaced.
func TestPacerRerateFollowsTheRate(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var p Pacer
	// 500 rows at 500/s: a budget of 1 s; the lot took 200 ms.
	require.Equal(t, 800*time.Millisecond, p.Wait(ms(0), ms(200), 500, 500))
	require.Equal(t, 700*time.Millisecond, p.Rerate(ms(300), 500), "the same rate: the same end")
	// At 1,000/s the lot's budget is 500 ms: the next lot may start at 500 ms.
	require.Equal(t, 50*time.Millisecond, p.Rerate(ms(450), 1000))
	// Back down to 250/s: 2 s from the lot's start.
	require.Equal(t, 1520*time.Millisecond, p.Rerate(ms(480), 250))
	// Past its end at a higher rate: no wait.
	require.Equal(t, time.Duration(0), p.Rerate(ms(1900), 5000))
	// The next lot, begun after that end, is paced from its own start (100 ms at 5,000/s).
	require.Equal(t, 50*time.Millisecond, p.Wait(ms(1950), ms(2000), 500, 5000))
	require.Equal(t, time.Duration(0), p.Rerate(ms(2010), -1), "unpaced: at once")
	require.Equal(t, time.Duration(0), p.Wait(ms(3000), ms(3010), 0, 500))
	require.Equal(t, time.Duration(0), p.Rerate(ms(3020), 100), "a lot that wrote nothing was not paced")
}
