package main

import (
	"cmp"
	"fmt"
	"image/color"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Scenario 8's report (cluster.go runs it): the medians over runs, node by
// node and for all nodes together, each against the single server's figure
// in the same run; the section of results.md and cluster.png.

// clusterFigure is one node's (or a deployment's) medians over runs in
// scenario 8: work a second, Redis CPU seconds a second, idle CPU a second,
// work per Redis CPU second (as measured, and with the node's idle CPU
// taken out), and its Redis CPU per op ÷ the single server's, per run
// (median and range; with idle taken out, median).
type clusterFigure struct {
	label                   string
	opsSec, cpuSec, idle    float64
	perCPU, perBusy         float64
	ratio, ratioLo, ratioHi float64
	ratioBusy               float64
}

// clusterMedian is one implementation on one deployment in scenario 8: its
// nodes' figures and all nodes' together (all work ÷ all CPU).
type clusterMedian struct {
	part, impl, deploy string
	nodes              []clusterFigure
	all                clusterFigure
	lost, refused      int
	lateness           time.Duration // worst over runs
	leases, rounds     int
	goroutines         int
	ttl, interval      time.Duration
	secs               float64
}

// clusterKey names a measurement's single-server counterpart.
type clusterKey struct {
	part, impl string
	run        int
}

// clusterMedians summarizes scenario 8. A ratio is taken within each run
// against the single server's figure for the same part and implementation,
// so that the machine's drift between runs stays out of it.
func clusterMedians(rs []clusterResult) []clusterMedian {
	single := map[clusterKey]clusterNode{}
	for _, r := range rs {
		if r.Deploy == "single" {
			single[clusterKey{r.Part, r.Impl, r.Run}] = clusterAll(r)
		}
	}
	var out []clusterMedian
	rs = slices.Clone(rs)
	slices.SortStableFunc(rs, func(a, b clusterResult) int {
		return cmp.Or(cmp.Compare(clusterRank(a.Impl), clusterRank(b.Impl)), cmp.Compare(clusterRank(a.Deploy), clusterRank(b.Deploy)))
	})
	for _, part := range group(rs, func(r clusterResult) string { return r.Part }) {
		inPart := filter(rs, func(r clusterResult) bool { return r.Part == part })
		for _, im := range group(inPart, func(r clusterResult) string { return r.Impl }) {
			of := filter(inPart, func(r clusterResult) bool { return r.Impl == im })
			for _, dep := range group(of, func(r clusterResult) string { return r.Deploy }) {
				out = append(out, clusterMedianOf(filter(of, func(r clusterResult) bool { return r.Deploy == dep }), single))
			}
		}
	}
	return out
}

// clusterRank orders scenario 8's implementations and deployments in its
// tables and plot, whatever order they ran in.
func clusterRank(s string) int {
	return slices.Index([]string{"tenure", "tenure-per-item", "baseline", "baseline+publish", "single", "cluster-1", "cluster"}, s)
}

// clusterAll is all of r's nodes as one: all the work, CPU and idle CPU.
func clusterAll(r clusterResult) clusterNode {
	n := clusterNode{Ops: r.ops(), CPU: r.cpu()}
	for _, nd := range r.Nodes {
		n.Idle += nd.Idle
	}
	return n
}

// clusterFigureOf is the figure of one node of runs (node picks it).
func clusterFigureOf(label string, runs []clusterResult, single map[clusterKey]clusterNode, node func(clusterResult) clusterNode) clusterFigure {
	per := func(n clusterNode) float64 { return float64(n.Ops) / n.CPU }
	busy := func(n clusterNode, secs float64) float64 { return float64(n.Ops) / (n.CPU - n.Idle*secs) }
	var ratios, busyRatios []float64
	for _, r := range runs {
		n := node(r)
		if s, ok := single[clusterKey{r.Part, r.Impl, r.Run}]; ok && n.Ops > 0 {
			ratios = append(ratios, per(s)/per(n))
			busyRatios = append(busyRatios, busy(s, r.Seconds)/busy(n, r.Seconds))
		}
	}
	lo, hi := minMax(ratios)
	return clusterFigure{label: label,
		opsSec:  medianOf(runs, func(r clusterResult) float64 { return float64(node(r).Ops) / r.Seconds }),
		cpuSec:  medianOf(runs, func(r clusterResult) float64 { return node(r).CPU / r.Seconds }),
		idle:    medianOf(runs, func(r clusterResult) float64 { return node(r).Idle }),
		perCPU:  medianOf(runs, func(r clusterResult) float64 { return per(node(r)) }),
		perBusy: medianOf(runs, func(r clusterResult) float64 { return busy(node(r), r.Seconds) }),
		ratio:   median(ratios), ratioLo: lo, ratioHi: hi, ratioBusy: median(busyRatios)}
}

func clusterMedianOf(runs []clusterResult, single map[clusterKey]clusterNode) clusterMedian {
	f := runs[0]
	m := clusterMedian{part: f.Part, impl: f.Impl, deploy: f.Deploy, leases: f.Leases, goroutines: f.Goroutines, ttl: f.TTL, interval: f.Interval}
	if len(f.Nodes) > 1 {
		for i, n := range f.Nodes {
			m.nodes = append(m.nodes, clusterFigureOf(fmt.Sprintf("node %d (%s)", i+1, n.Addr), runs, single,
				func(r clusterResult) clusterNode { return r.Nodes[i] }))
		}
	}
	all := fmt.Sprintf("all %d nodes", len(f.Nodes))
	switch {
	case f.Deploy == "single":
		all = "the server"
	case len(f.Nodes) == 1:
		all = "its one node"
	}
	m.all = clusterFigureOf(all, runs, single, clusterAll)
	for _, r := range runs {
		m.lost, m.refused = max(m.lost, r.Lost), max(m.refused, r.Refused)
		m.lateness = max(m.lateness, r.Lateness)
		m.secs = max(m.secs, r.Seconds)
	}
	if m.interval > 0 {
		m.rounds = int(m.secs/m.interval.Seconds() + 0.5)
	}
	return m
}

func clusterSection(b *strings.Builder, rs []clusterResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## 8. Outgrowing one Redis: a 3-primary Cluster beside a single server\n\n")
	p("A single redis-server and a Redis Cluster of 3 primaries (no replicas, the same configuration), both on loopback and started by the scenario, measured in the same run in a rotating order. ")
	p("Redis CPU is each node's INFO cpu (user + system) over the window, its idle work included; idle CPU is each node's with no client but the harness's, measured at the start of each run (a Cluster node also gossips on its bus). ")
	p("Each cycle or renewal is counted to the node that serves its name (the Cluster client's slot map). Per Redis CPU second = the node's work ÷ its CPU; for *all nodes*, all the work ÷ all the nodes' CPU. ")
	p("÷ single = the single server's figure ÷ this one's in the same run, for the same implementation: Redis CPU per op relative to one server's (issue 32's target for tenure: at most 1.1×), median over runs (range); ")
	p("*idle out* = the same with each node's idle CPU taken out of its window. ")
	p("*cluster-1*, where it ran, is a Cluster of one primary serving all 16,384 slots: cluster mode without the split over nodes. ")
	p("Medians of %d runs.\n\n", len(group(rs, func(r clusterResult) int { return r.Run })))
	ms := clusterMedians(rs)
	for _, part := range []string{"cycle", "hold"} {
		if parts := filter(ms, func(m clusterMedian) bool { return m.part == part }); len(parts) > 0 {
			clusterTable(p, parts)
		}
	}
	p("\n![cluster](cluster.png)\n\n")
}

func clusterTable(p func(string, ...any), ms []clusterMedian) {
	f := ms[0]
	unit := "cycles"
	if f.part == "cycle" {
		p("**Uncontended cycle**: acquire + release of fresh names from %d goroutines on one client, %.1fs windows. `tenure`: `Manager.Acquire` + `Release`; ", f.goroutines, f.secs)
		p("`baseline`: SET NX PX + a compare-and-delete script on the name's tenure key (scenario 1's); `baseline+publish`: the same with a PUBLISH in the script, as tenure's release.lua sends one (a Cluster sends every PUBLISH to all its nodes).\n\n")
	} else {
		unit = "renewals"
		p("\n**Leases held**: %d leases, TTL %v renewed every %v, acquired by %d goroutines with `TryAcquire`, then watched for %d renewal rounds (%.1fs). ",
			f.leases, f.ttl, f.interval.Round(time.Millisecond), acquirers, f.rounds, f.secs)
		p("`tenure` batches renewals (one server: up to 256 leases a `renew_leases.lua` call; a Cluster: per node, `renew_node.lua`); `tenure-per-item` is the same library behind a client type its backend does not know, renewing each lease with its own `renew.lua` call, ")
		p("which is what batching per slot came to on a Cluster (per-slot batching cannot be chosen from outside the library).\n\n")
	}
	p("| implementation | deployment | node | %s/s | Redis CPU s/s | idle CPU s/s | %s per Redis CPU second | Redis CPU µs per op | ÷ single (range) | ÷ single, idle out |", unit, unit)
	if f.part == "hold" {
		p(" worst lateness | lost |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	} else {
		p("\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	}
	for _, m := range ms {
		for i, fig := range append(m.nodes, m.all) {
			label := fig.label
			if i == len(m.nodes) {
				label = "**" + label + "**"
			}
			p("| %s | %s | %s | %.0f | %.4f | %.4f | %.0f | %.2f | %s (%s–%s) | %s |", m.impl, m.deploy, label, fig.opsSec, fig.cpuSec, fig.idle, fig.perCPU, 1e6/fig.perCPU,
				ratio(fig.ratio), ratio(fig.ratioLo), ratio(fig.ratioHi), ratio(fig.ratioBusy))
			if f.part == "hold" {
				p(" %s | %s |", dur(m.lateness), lostRefused(m.lost, m.refused))
			}
			p("\n")
		}
	}
	if f.part == "hold" {
		clusterBatching(p, ms)
	}
}

// clusterBatching is what batching buys on each deployment: tenure's Redis
// CPU per renewal ÷ tenure-per-item's, all nodes together.
func clusterBatching(p func(string, ...any), ms []clusterMedian) {
	find := func(impl, dep string) (clusterMedian, bool) {
		for _, m := range ms {
			if m.impl == impl && m.deploy == dep {
				return m, true
			}
		}
		return clusterMedian{}, false
	}
	first := true
	for _, dep := range group(ms, func(m clusterMedian) string { return m.deploy }) {
		t, ok1 := find("tenure", dep)
		pi, ok2 := find("tenure-per-item", dep)
		if !ok1 || !ok2 {
			continue
		}
		if first {
			p("\nWhat batching buys: Redis CPU µs per renewal, all nodes together (medians), batched ÷ per item:\n\n| deployment | tenure | tenure-per-item | ratio |\n|---|---:|---:|---:|\n")
			first = false
		}
		p("| %s | %.2f | %.2f | %s |\n", dep, 1e6/t.all.perCPU, 1e6/pi.all.perCPU, ratio(pi.all.perCPU/t.all.perCPU))
	}
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
	return saveColumn(file, rows, 11*vg.Inch, 4*vg.Inch)
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
