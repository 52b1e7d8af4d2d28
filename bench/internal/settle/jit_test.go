package settle

import (
	"testing"
	"time"
)

func TestJITSampleSinceCountsThreadsThatCameAndWent(t *testing.T) {
	s0 := JITSample{"10": time.Second, "11": 2 * time.Second}
	d, ok := JITSample{"10": 3 * time.Second, "11": 2 * time.Second, "12": time.Second}.Since(s0)
	if d != 3*time.Second || !ok {
		t.Fatalf("a new thread: Since = %v, %v; want 3s, true", d, ok)
	}
	d, ok = JITSample{"10": 3 * time.Second}.Since(s0)
	if d != 2*time.Second || ok {
		t.Fatalf("a thread that ended: Since = %v, %v; want 2s (a lower bound), false", d, ok)
	}
}
