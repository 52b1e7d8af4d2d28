package relay

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/bench/internal/riverbench"
	"github.com/heraldhq/herald/bench/result"
)

// runRiver runs River's measurement on its own scratch database, with the same rates,
// phase length and backlog as the relays, and merges its figures (group "River"), series
// and notes into res.
func runRiver(b *testing.B, bin string, res *result.Result) {
	b.Helper()
	rs := make([]string, len(rates))
	for i, r := range rates {
		rs[i] = strconv.Itoa(r)
	}
	river := riverbench.Run(b, bin, "-rates", strings.Join(rs, ","), "-phase", phaseDuration().String(),
		"-tail", tailLimit().String(), "-backlog", strconv.Itoa(backlogSize()), "-conns", strconv.Itoa(generatorConns))
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
