package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffCeiling(t *testing.T) {
	b := Backoff{Base: 2 * time.Second, Max: 5 * time.Minute}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		require.Equal(t, w, b.Ceiling(i+1), "attempt %d", i+1)
	}
	require.Equal(t, 5*time.Minute, b.Ceiling(400), "no overflow on large attempt numbers")
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 2 * time.Second, Max: 5 * time.Minute}
	require.Equal(t, time.Duration(0), b.Delay(1, 0, func() float64 { return 0 }))
	require.Equal(t, time.Second, b.Delay(1, 0, func() float64 { return 0.5 }))
	require.Equal(t, 3*time.Second+999*time.Millisecond+999*time.Microsecond+996*time.Nanosecond,
		b.Delay(2, 0, func() float64 { return 0.999999999 }), "sub-second precision")
	require.Equal(t, 10*time.Minute, b.Delay(1, 10*time.Minute, func() float64 { return 0.9 }), "Retry-After beats Max")
	require.Equal(t, 3*time.Second, b.Delay(2, time.Second, func() float64 { return 0.75 }), "the jittered delay when longer")

	huge := 999999999 * time.Second
	half := func() float64 { return 0.5 }
	require.Equal(t, DefaultMaxRetryAfter, b.Delay(1, huge, half), "no cap of its own: the default")
	b.MaxRetryAfter = 10 * time.Minute
	require.Equal(t, 10*time.Minute, b.Delay(3, huge, half))
	require.Equal(t, 7*time.Minute, b.Delay(3, 7*time.Minute, half), "under the cap: as it is")
}
