package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
)

// compareCmd prints two runs' figures side by side: A, B, the change in % and whether it is
// better or worse (by Figure.Better) beyond the noise (the runs' own measured spread if
// either was repeated, else the documented default).
func compareCmd(args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return errors.New("usage: suite compare RUN_DIR_A RUN_DIR_B")
	}
	a, err := readRun(filepath.Join(args[0], "results.json"))
	if err != nil {
		return err
	}
	b, err := readRun(filepath.Join(args[1], "results.json"))
	if err != nil {
		return err
	}
	writeComparison(stdout, args[0], args[1], a, b)
	return nil
}

func writeComparison(w io.Writer, nameA, nameB string, a, b *Run) {
	fmt.Fprintf(w, "A %s: commit %s, BENCH_SCALE=%g, %s, %d cores\n", nameA, short(a.Machine.Commit), a.Scale, a.Machine.CPUModel, a.Machine.Cores)
	fmt.Fprintf(w, "B %s: commit %s, BENCH_SCALE=%g, %s, %d cores\n", nameB, short(b.Machine.Commit), b.Scale, b.Machine.CPUModel, b.Machine.Cores)
	if !a.Machine.sameMachine(b.Machine) || a.Scale != b.Scale {
		fmt.Fprintln(w, "warning: the runs differ in machine or BENCH_SCALE; the changes compare unlike things")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tgroup\tfigure\tA\tB\tunit\tchange\tnoise\t\t")
	for _, c := range compareRuns(a, b, noiseFrom(b, a)) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f %%\t%s\t\n", c.Scenario, c.Figure.Group, c.Figure.Name,
			valueOr(c.A, c.HasA), valueOr(c.B, c.HasB), c.Figure.Unit, pct(c.Pct), c.Threshold, c.Verdict())
	}
	tw.Flush()
}
