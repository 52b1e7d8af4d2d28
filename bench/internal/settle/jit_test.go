package settle

import (
	"testing"
	"time"
)

func TestStatCPUCountsAfterTheCommandName(t *testing.T) {
	// A HotSpot compiler thread: its name holds a space and the fields after it are counted
	// from the closing parenthesis. utime 1544, stime 12.
	line := []byte("2450 (C2 CompilerThre) S 2432 2432 2432 0 -1 4194624 95306 0 0 0 1544 12 0 0 0 -10 1 0 1915 0 0\n")
	got, err := statCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if got != 1556 {
		t.Fatalf("statCPU = %d ticks, want 1556", got)
	}
	if _, err := statCPU([]byte("2450 (C2 CompilerThre) S 2432")); err == nil {
		t.Fatal("statCPU of a short line: no error")
	}
}

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
