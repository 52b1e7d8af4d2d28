package main

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/heraldhq/herald/bench/result"
)

// chartFile is the PNG a scenario's chart is drawn to, relative to the run directory.
func chartFile(scenario string, c result.Chart) string {
	return scenario + "-" + c.File + ".png"
}

// drawCharts draws every chart of the scenario's Result into dir and returns the files.
func drawCharts(dir string, r *result.Result) ([]string, error) {
	var files []string
	for _, c := range r.Charts {
		name := chartFile(r.Scenario, c)
		if err := drawChart(filepath.Join(dir, name), c); err != nil {
			return files, fmt.Errorf("chart %s of %s: %w", c.File, r.Scenario, err)
		}
		files = append(files, name)
	}
	return files, nil
}

// drawChart draws a line chart (series over x) or a CDF (x: latency, log scale when LogX;
// y: the fraction of values at or below x) as a 20 × 11 cm PNG.
func drawChart(path string, c result.Chart) error {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Add(plotter.NewGrid())
	if c.Kind == "cdf" {
		if p.Y.Label.Text == "" {
			p.Y.Label.Text = "quantile"
		}
		p.Y.Min, p.Y.Max = 0, 1
	}
	logX, logY := c.LogX, c.LogY
	drawn := 0
	for i, s := range c.Series {
		pts := make(plotter.XYs, 0, len(s.X))
		for j := range min(len(s.X), len(s.Y)) {
			// A log axis cannot show 0 or less: such points are left out.
			if (logX && s.X[j] <= 0) || (logY && s.Y[j] <= 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: s.X[j], Y: s.Y[j]})
		}
		if len(pts) == 0 {
			continue
		}
		// HDR's cumulative distribution gives points at percentile ticks: straight lines between
		// them, as for any series. A short series also shows its points (one point draws no line).
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("series %s: %w", s.Name, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		thumbs := []plot.Thumbnailer{l}
		if len(pts) <= 30 {
			sc.Color, sc.Shape, sc.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(2.5)
			p.Add(l, sc)
			thumbs = append(thumbs, sc)
		} else {
			p.Add(l)
		}
		if s.Name != "" {
			p.Legend.Add(s.Name, thumbs...)
		}
		drawn++
	}
	// An empty log axis has no range to draw: such a chart stays linear (and empty).
	if logX && drawn > 0 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	// A line chart of counts and rates starts at 0, so that a small wobble does not look
	// like a collapse.
	if c.Kind != "cdf" && !logY && drawn > 0 && p.Y.Min > 0 {
		p.Y.Min = 0
	}
	if logY && drawn > 0 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if c.Kind == "cdf" {
		p.Legend.Left, p.Legend.Top = true, true
	} else {
		p.Legend.Top = true
	}
	p.Legend.TextStyle.Color = color.Black
	if err := p.Save(20*vg.Centimeter, 11*vg.Centimeter, path); err != nil {
		return fmt.Errorf("save %s: %w", filepath.Base(path), err)
	}
	return nil
}
