package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

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

func holdPlot(r *results, file string) error {
	p := plot.New()
	p.Title.Text = "Holding N leases: client CPU"
	p.X.Label.Text = "leases held"
	p.Y.Label.Text = "client CPU seconds per second"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{}
	type key struct {
		impl string
		ttl  time.Duration
	}
	keys := group(r.Hold, func(h holdResult) key { return key{h.Impl, h.TTL} })
	for i, k := range keys {
		var xys plotter.XYs
		for _, h := range r.Hold {
			if h.Impl == k.impl && h.TTL == k.ttl {
				xys = append(xys, plotter.XY{X: float64(h.Leases), Y: h.CPUSec})
			}
		}
		slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(fmt.Sprintf("%s, TTL %v", k.impl, k.ttl), l, pts)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}

func lossPlot(r *results, file string) error {
	p := plot.New()
	p.Title.Text = "Loss detection: server expiry − lease cancellation, per trial"
	p.X.Label.Text = "trial"
	p.Y.Label.Text = "margin (ms); below 0 would be unsafe"
	for i, l := range r.Loss {
		xys := make(plotter.XYs, len(l.Margins))
		for j, m := range l.Margins {
			xys[j] = plotter.XY{X: float64(j), Y: float64(m) / 1e6}
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		p.Add(s)
		p.Legend.Add(fmt.Sprintf("TTL %v (drift %v)", l.TTL, l.Drift), s)
		d, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(l.Drift) / 1e6}, {X: float64(max(len(l.Margins)-1, 1)), Y: float64(l.Drift) / 1e6}})
		if err != nil {
			return err
		}
		d.Color = plotutil.Color(i)
		d.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(d)
	}
	n := 1
	for _, l := range r.Loss {
		n = max(n, len(l.Margins)-1)
	}
	zero, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: float64(n), Y: 0}})
	if err != nil {
		return err
	}
	zero.Color = color.Black
	p.Add(zero)
	p.Y.Min = min(p.Y.Min, -1)
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}

// millionPlot stacks panels sharing the time axis: renewals/s against the
// schedule, heap in use, and, only if any were lost, leases lost.
func millionPlot(m millionResult, file string) error {
	series := func(f func(millionSample) float64) plotter.XYs {
		xys := make(plotter.XYs, len(m.Series))
		for i, s := range m.Series {
			xys[i] = plotter.XY{X: s.T, Y: f(s)}
		}
		return xys
	}
	end := m.Series[len(m.Series)-1].T
	panel := func(title, ylabel string, xys plotter.XYs, i int) (*plot.Plot, []plot.Thumbnailer, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.X.Label.Text = "seconds since the window began"
		p.X.Min, p.X.Max = 0, end
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, nil, err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Y.Min = 0
		return p, []plot.Thumbnailer{l, pts}, nil
	}
	lost := m.Series[len(m.Series)-1].Lost
	title := fmt.Sprintf("%d leases, TTL %v renewed every %v: renewals/s per 2s", m.Leases, m.TTL, m.Interval)
	if lost > 0 {
		title += fmt.Sprintf(" — LOST %d", lost)
	}
	ren, observed, err := panel(title, "renewals/s", series(func(s millionSample) float64 { return s.RenewSec }), 0)
	if err != nil {
		return err
	}
	want := float64(m.Leases) / m.Interval.Seconds()
	sched, err := plotter.NewLine(plotter.XYs{{X: 0, Y: want}, {X: end, Y: want}})
	if err != nil {
		return err
	}
	sched.Color = color.Black
	sched.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	ren.Add(sched)
	ren.Legend.Add("observed", observed...)
	ren.Legend.Add(fmt.Sprintf("schedule: %.0f/s", want), sched)
	ren.Legend.Top = true
	ren.Y.Max = max(ren.Y.Max, want) * 1.25
	heap, _, err := panel("Go heap in use (HeapAlloc, no forced GC)", "MB", series(func(s millionSample) float64 { return s.HeapMB }), 1)
	if err != nil {
		return err
	}
	rows := [][]*plot.Plot{{ren}, {heap}}
	if lost > 0 {
		lp, _, err := panel("Leases lost so far", "leases", series(func(s millionSample) float64 { return float64(s.Lost) }), 2)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{lp})
	}
	c, err := draw.NewFormattedCanvas(8*vg.Inch, vg.Length(3*len(rows))*vg.Inch, "png")
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
