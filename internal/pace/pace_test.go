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
