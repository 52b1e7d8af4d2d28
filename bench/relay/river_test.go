package relay

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/bench/result"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// buildRiver compiles bench/river (its own module, so that herald's go.mod does not carry
// River) once, and returns the binary.
func buildRiver(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "river")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "river")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build bench/river: %v\n%s", err, out)
	}
	return bin
}

// runRiver runs River's measurement on its own scratch database, with the same rates,
// phase length and backlog as the relays, and merges its figures (group "River"), series
// and notes into res.
func runRiver(b *testing.B, bin string, res *result.Result) {
	b.Helper()
	dir := b.TempDir()
	rs := make([]string, len(rates))
	for i, r := range rates {
		rs[i] = strconv.Itoa(r)
	}
	cmd := exec.Command(bin, "-rates", strings.Join(rs, ","), "-phase", phaseDuration().String(),
		"-tail", tailLimit().String(), "-backlog", strconv.Itoa(backlogSize()), "-conns", strconv.Itoa(generatorConns))
	cmd.Env = append(os.Environ(), "BENCH_RESULT_DIR="+dir, "RIVER_BENCH_DATABASE_URL="+stacktest.PostgresURL(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		b.Log(line)
	}
	if err != nil {
		b.Fatalf("bench/river: %v", err)
	}
	river, err := result.Read(filepath.Join(dir, "river.json"))
	heraldtest.Must(b, err)
	res.Figures = append(res.Figures, river.Figures...)
	for _, c := range river.Charts {
		for _, s := range c.Series {
			addSeries(res, c.File, s)
		}
	}
	for _, n := range river.Notes {
		res.Note("%s", n)
	}
	res.Load += fmt.Sprintf(". River: %s", river.Load)
}
