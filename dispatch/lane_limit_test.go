package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// A lane's adaptive limit bounds its busy workers: when it shrinks, slots are parked as
// workers free them; when it grows back, they are free again; at the end every parked slot is
// given back. HIGH gets no limit at all.
func TestLaneFollowsItsLimit(t *testing.T) {
	limit := adapt.NewLimiter("dispatch.low", 8)
	l := &lane{limit: limit}
	w := &workers{sem: make(chan struct{}, 8)}
	ctx, cancel := context.WithCancel(context.Background())
	done := l.followLimit(ctx, w)

	for range 8 { // every slot busy
		w.sem <- struct{}{}
	}
	limit.Step(adapt.Congested) // 8 × 0.7 → 5
	require.Equal(t, 5, limit.Limit())
	for range 8 { // the workers finish: three of their slots are parked
		<-w.sem
	}
	heraldtest.WaitFor(t, 5*time.Second, "three slots parked", func() bool { return len(w.sem) == 3 })
	for range 5 {
		w.sem <- struct{}{}
	}
	select {
	case w.sem <- struct{}{}:
		t.Fatal("a sixth worker started past the limit of 5")
	default:
	}

	limit.Step(adapt.Unknown) // no signal: back to the ceiling
	heraldtest.WaitFor(t, 5*time.Second, "parked slots given back", func() bool { return len(w.sem) == 5 })
	limit.Step(adapt.Congested)
	heraldtest.WaitFor(t, 5*time.Second, "parked again", func() bool { return len(w.sem) == 8 })
	cancel()
	<-done
	require.Len(t, w.sem, 5, "at the end only the workers' own slots are taken")

	require.Nil(t, laneLimit(nil, herald.PriorityLow, 8), "no controller: fixed concurrency")
	require.Nil(t, laneLimit(&adapt.Controller{}, herald.PriorityHigh, 12), "HIGH is never limited")
	require.Equal(t, "dispatch.normal", laneLimit(&adapt.Controller{}, herald.PriorityNormal, 6).Name())
}
