package relay

import (
	"fmt"

	"github.com/heraldhq/herald/bench/result"
)

// mergeRiver merges River's figures (group "River"), series and notes into res.
func mergeRiver(res *result.Result, river *result.Result) {
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
