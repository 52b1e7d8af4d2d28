package result

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWriteAndReadBack(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BENCH_RESULT_DIR", dir)
	t.Setenv("BENCH_SCALE", "0.01")
	r := New("relay", "commit → Kafka")
	h := NewLatency()
	for v := int64(1); v <= 1000; v++ {
		require.NoError(t, h.RecordValue(v*1000)) // 1 … 1000 ms
	}
	r.Latencies("herald relay", "commit → Kafka", h, "≤ 10")
	r.Chart(Chart{File: "cdf", Kind: "cdf", Series: []Series{CDF("herald relay", h)}})
	require.NoError(t, r.Write())

	got, err := Read(filepath.Join(dir, "relay.json"))
	require.NoError(t, err)
	require.Equal(t, 0.01, got.Scale)
	require.Len(t, got.Figures, 5)
	require.InDelta(t, 500, got.Figures[0].Value, 1, "p50 in ms")
	require.InDelta(t, 990, got.Figures[2].Value, 1, "p99 in ms")
	s := got.Charts[0].Series[0]
	require.Equal(t, 1.0, s.Y[len(s.Y)-1], "a CDF ends at 1")
	require.InDelta(t, 1000, s.X[len(s.X)-1], 1)
}

func TestScale(t *testing.T) {
	for in, want := range map[string]float64{"": 1, "0.1": 0.1, "x": 1, "-2": 1, "0": 1, "NaN": 1} {
		t.Setenv("BENCH_SCALE", in)
		require.Equal(t, want, Scale(), in)
	}
	t.Setenv("BENCH_SCALE", "0.01")
	require.Equal(t, 1000, Scaled(100_000, 10))
	require.Equal(t, 10, Scaled(100, 10))
}

func TestPerSecond(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := &PerSecond{T0: t0}
	c.Add(t0.Add(-time.Second), 5) // before T0: dropped
	c.Add(t0.Add(100*time.Millisecond), 1)
	c.Add(t0.Add(900*time.Millisecond), 2)
	c.Set(t0.Add(2500*time.Millisecond), 7)
	c.Set(t0.Add(2600*time.Millisecond), 4) // the last sample of a second wins
	s := c.Series("calls", 4)
	require.Equal(t, []float64{0, 1, 2, 3}, s.X)
	require.Equal(t, []float64{3, 0, 4, 0}, s.Y)
	require.Equal(t, 4.0, c.Peak())
}

func TestScaledDuration(t *testing.T) {
	t.Setenv("BENCH_SCALE", "0.01")
	require.Equal(t, 600*time.Millisecond, ScaledDuration(time.Minute, 0))
	require.Equal(t, 3*time.Second, ScaledDuration(time.Minute, 3*time.Second))
}
