package openloop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunKeepsTheScheduleWhenCallsAreFast(t *testing.T) {
	var mu sync.Mutex
	dues := map[int]time.Time{}
	st, err := Run(context.Background(), Config{Rate: 200, Duration: 500 * time.Millisecond, Workers: 4},
		func(_ context.Context, i int, due time.Time) error {
			mu.Lock()
			dues[i] = due
			mu.Unlock()
			return nil
		})
	require.NoError(t, err)
	require.Equal(t, 100, st.Calls)
	require.Len(t, dues, 100, "every sequence number once")
	require.Equal(t, 5*time.Millisecond, dues[1].Sub(dues[0]), "due times 1/rate apart")
	require.Equal(t, 99*5*time.Millisecond, dues[99].Sub(dues[0]))
}

func TestRunCountsFromTheDueTimeWhenCallsAreSlow(t *testing.T) {
	// One worker, each call 10 ms, due every 1 ms, a grace long enough for all: the schedule
	// slips and Stats says so; the due times handed out stay those of the schedule.
	dues := make([]time.Time, 20)
	st, err := Run(context.Background(), Config{Rate: 1000, Duration: 20 * time.Millisecond, Workers: 1, Grace: time.Second},
		func(_ context.Context, i int, due time.Time) error {
			dues[i] = due
			time.Sleep(10 * time.Millisecond)
			return nil
		})
	require.NoError(t, err)
	require.Equal(t, 20, st.Calls)
	require.GreaterOrEqual(t, st.MaxBehind, 150*time.Millisecond)
	require.GreaterOrEqual(t, st.Behind, 18)
	require.Less(t, st.Rate(), 110.0)
	require.Equal(t, 19*time.Millisecond, dues[19].Sub(dues[0]), "the schedule's due times, not the late starts")
}

func TestRunStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	st, err := Run(context.Background(), Config{Rate: 1000, Duration: time.Second, Workers: 2},
		func(_ context.Context, i int, _ time.Time) error {
			if i == 10 {
				return boom
			}
			return nil
		})
	require.ErrorIs(t, err, boom)
	require.Less(t, st.Calls, 1000)
}

func TestRunSkipsWhatItCannotStartInTime(t *testing.T) {
	// One worker, 20 ms per call, 100 calls due within 100 ms: by the end of the grace
	// (10 ms) only a handful started; the rest are skipped, not made late.
	st, err := Run(context.Background(), Config{Rate: 1000, Duration: 100 * time.Millisecond, Workers: 1},
		func(context.Context, int, time.Time) error {
			time.Sleep(20 * time.Millisecond)
			return nil
		})
	require.NoError(t, err)
	require.LessOrEqual(t, st.Calls, 7)
	require.Equal(t, 100, st.Calls+st.Skipped)
	require.Less(t, st.Elapsed, 200*time.Millisecond)
}

func TestStatsAddIsTheSlicesAsOnePhase(t *testing.T) {
	a := Stats{Calls: 10, Elapsed: time.Second, MaxBehind: 3 * time.Millisecond, Behind: 2, Skipped: 1}
	b := Stats{Calls: 20, Elapsed: 2 * time.Second, MaxBehind: time.Millisecond, Behind: 5}
	got := a.Add(b)
	want := Stats{Calls: 30, Elapsed: 3 * time.Second, MaxBehind: 3 * time.Millisecond, Behind: 7, Skipped: 1}
	if got != want {
		t.Fatalf("Add: got %+v, want %+v", got, want)
	}
	if r := got.Rate(); r != 10 {
		t.Fatalf("rate of the sum: got %v, want 10", r)
	}
}
