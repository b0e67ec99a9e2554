package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

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

// clusterPlot draws scenario 8, if it ran: a panel per part, a bar per node (and per
// deployment, all its nodes together) of work per Redis CPU second, with
// the line the Cluster's per-node figure must stay above (the single
// server's ÷ 1.1).
func clusterPlot(rs []clusterResult, file string) error {
	ms := clusterMedians(rs)
	var rows [][]*plot.Plot
	for _, part := range []string{"cycle", "hold"} {
		parts := filter(ms, func(m clusterMedian) bool { return m.part == part })
		if len(parts) == 0 {
			continue
		}
		p, err := clusterPanel(parts)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{p})
	}
	if len(rows) == 0 {
		return nil
	}
	c, err := draw.NewFormattedCanvas(11*vg.Inch, vg.Length(4*float64(len(rows)))*vg.Inch, "png")
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

// clusterPanel is one part's plot: its bars (clusterBars), and the target
// line over tenure's.
func clusterPanel(ms []clusterMedian) (*plot.Plot, error) {
	p := plot.New()
	unit := "renewals"
	p.Title.Text = fmt.Sprintf("%d leases held at TTL %v: renewals per second of Redis CPU (median)", ms[0].leases, ms[0].ttl)
	if ms[0].part == "cycle" {
		unit = "cycles"
		p.Title.Text = fmt.Sprintf("Uncontended cycle, %d goroutines: cycles per second of Redis CPU (median)", ms[0].goroutines)
	}
	p.Y.Label.Text = unit + " / Redis CPU second"
	names, err := clusterBars(p, ms)
	if err != nil {
		return nil, err
	}
	tenureEnd, target := -0.5, 0.0
	for _, m := range ms {
		if m.impl == "tenure" {
			tenureEnd += float64(len(m.nodes) + 1)
			if m.deploy == "single" {
				target = m.all.perCPU / 1.1
			}
		}
	}
	if target > 0 {
		line, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: target}, {X: tenureEnd, Y: target}})
		if err != nil {
			return nil, err
		}
		line.Color, line.Dashes = color.Black, []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(line)
		p.Legend.Add("tenure on one server ÷ 1.1 (target)", line)
	}
	p.Legend.Top = true
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.7 // headroom for the legend
	p.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		ts := plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ts {
			if ts[i].Label != "" {
				ts[i].Label = fmt.Sprintf("%.0f", ts[i].Value)
			}
		}
		return ts
	})
	return p, nil
}

// clusterBars adds one part's bars to p: tenure's on each node and on all
// nodes together, the other implementations' on all nodes together, a
// colour for one server, a Cluster node and a Cluster's nodes together, the
// value written above each (a fourth colour for a Cluster of one node). It returns the bars' names, in order.
func clusterBars(p *plot.Plot, ms []clusterMedian) ([]string, error) {
	var names []string
	var labels plotter.XYLabels
	var legend [4]*plotter.BarChart
	for _, m := range ms {
		figs := []clusterFigure{m.all}
		if m.impl == "tenure" {
			figs = append(m.nodes, m.all)
		}
		for j, fig := range figs {
			x := float64(len(names))
			bars, err := plotter.NewBarChart(plotter.Values{fig.perCPU}, vg.Points(26))
			if err != nil {
				return nil, err
			}
			kind := 0
			switch {
			case m.deploy == "cluster-1":
				kind = 3
			case m.deploy != "single" && j < len(figs)-1:
				kind = 1
			case m.deploy != "single":
				kind = 2
			}
			bars.XMin, bars.Color, bars.LineStyle.Width = x, plotutil.Color(kind), 0
			p.Add(bars)
			legend[kind] = bars
			node, _, _ := strings.Cut(fig.label, " (")
			node = strings.NewReplacer("the server", "", "its one node", "", "all 3 nodes", "all 3").Replace(node)
			impl := strings.NewReplacer("+", "\n+", "-per-item", "\nper item").Replace(m.impl)
			names = append(names, impl+"\n"+m.deploy+"\n"+node)
			labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: fig.perCPU})
			labels.Labels = append(labels.Labels, fmt.Sprintf("%.0f", fig.perCPU))
		}
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
	}
	p.Add(l)
	for k, what := range []string{"one server", "a Cluster node", "all the Cluster's nodes", "a Cluster of one node"} {
		if legend[k] != nil {
			p.Legend.Add(what, legend[k])
		}
	}
	return names, nil
}
