package main

// The plots: writePlots calls the plot of each scenario that ran (drawn in
// that scenario's file); groupedBars and saveColumn are shared.

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// writePlots writes one PNG per scenario that ran.
func writePlots(r *results, dir string) error {
	if len(r.Cycle) > 0 {
		if err := cyclePlot(r, filepath.Join(dir, "cycle.png")); err != nil {
			return err
		}
	}
	if len(r.Contended) > 0 {
		if err := contendedPlots(r, dir); err != nil {
			return err
		}
	}
	if len(r.Hold) > 0 {
		if err := holdPlot(r, filepath.Join(dir, "hold.png")); err != nil {
			return err
		}
	}
	if len(r.Loss) > 0 {
		if err := lossPlot(r, filepath.Join(dir, "loss.png")); err != nil {
			return err
		}
	}
	if len(r.Million) > 0 && len(r.Million[0].Series) > 0 {
		if err := millionPlot(r.Million[0], filepath.Join(dir, "million.png")); err != nil {
			return err
		}
	}
	return clusterPlot(r.Cluster, filepath.Join(dir, "cluster.png"))
}

// groupedBars draws one bar per (series, category): series are
// implementations, categories the x axis.
func groupedBars[K comparable](file, title, ylabel string, series []string, cats []K, catLabel string, value func(string, K) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.X.Label.Text = catLabel
	w := vg.Points(240 / float64(max(len(series), 1)))
	for i, s := range series {
		vals := make(plotter.Values, len(cats))
		for j, c := range cats {
			vals[j] = value(s, c)
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = vg.Length(0)
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s, bars)
	}
	p.Legend.Top = true
	// Headroom for the legend above the tallest bar.
	p.Y.Min = 0
	p.Y.Max *= 1.1 + 0.06*float64(len(series))
	names := make([]string, len(cats))
	for j, c := range cats {
		names[j] = fmt.Sprint(c)
	}
	p.NominalX(names...)
	return p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}

// saveColumn draws rows of one plot each, one above the other with their
// axes aligned, into a PNG width wide and rowHeight a row.
func saveColumn(file string, rows [][]*plot.Plot, width, rowHeight vg.Length) error {
	c, err := draw.NewFormattedCanvas(width, vg.Length(len(rows))*rowHeight, "png")
	if err != nil {
		return err
	}
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(12)}
	canvases := plot.Align(rows, tiles, draw.New(c))
	for i, row := range rows {
		row[0].Draw(canvases[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
