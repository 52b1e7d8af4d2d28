package settle

import "testing"

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
