package main

// Scenario 5, a million leases: one process, one lease.Manager, acquires N
// leases (1,000,000; -medium 200,000; -short 20,000) with TryAcquire from
// 64 goroutines and holds them for minutes, at TTL 30s renewed every 10s
// unless -million-ttl says otherwise. It is measured against its target,
// not a peer: at most 600 bytes a lease in the process, none lost,
// goroutines constant in N. It measures the time to acquire them all,
// goroutines and bytes per lease, renewals a second, the worst lateness,
// client and Redis CPU and memory, round trips and commands a second, and
// how long Close takes to release them all; and a time series of renewals,
// heap and losses (million.png). A lease lost or not acquired fails the run.

import (
	"context"
	"fmt"
	"image/color"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

type millionCase struct {
	Leases int
	Window time.Duration // a whole number of sample periods
}

// The TTL and renewal interval of scenario 5: 30s renewed every 10s
// (100,000 renewals a second at a million) unless -million-ttl says
// otherwise (the interval is then a third of it: -million-ttl 10s is
// 300,000 a second). The sample period is a fifth of the interval, as in
// scenario 3: no renewal falls between two looks at a lease.
var (
	millionTTL      = 30 * time.Second
	millionInterval = 10 * time.Second
	millionEvery    = 2 * time.Second
)

// setMillionTTL sets scenario 5's TTL, interval and sample period.
func setMillionTTL(ttl time.Duration) {
	millionTTL, millionInterval, millionEvery = ttl, ttl/3, ttl/15
}

// millionSample is one point of the time series, taken every millionEvery.
type millionSample struct {
	T        float64       // seconds since the window began
	RenewSec float64       // renewals a second since the previous sample
	HeapMB   float64       // runtime HeapAlloc, 1e6 bytes; no forced GC
	Lost     int           // leases lost so far
	Late     time.Duration // worst lateness so far (0 before the first renewal)
}

type millionResult struct {
	Target          int // leases asked for
	Leases          int // leases held when the window began: the largest N reached
	TTL             time.Duration
	Interval        time.Duration
	Window          time.Duration // the measured window
	AcquireSec      float64       // time to acquire them all, 64 goroutines
	GoroutinesEarly int           // added once the first 1% were held
	Goroutines      int           // added once all were held
	BytesHeld       float64       // heap + goroutine stacks added per lease, after GC, once all were held
	BytesEnd        float64       // the same at the end of the window
	Renewals        int64         // renewals observed in the window
	RenewSec        float64
	Lateness        time.Duration // worst renewal lateness against its schedule
	Lost            int           // leases whose context ended during the window
	CPUSec          float64       // client CPU seconds per second (getrusage), the sampling included
	RedisCPU        float64       // server CPU seconds per second (INFO cpu)
	RedisMem        int64         // INFO memory used_memory added by acquiring (after FLUSHALL → all held)
	RedisMemLease   float64
	TripsSec        float64
	CmdsSec         float64
	SampleMs        float64 // mean time of one sampling pass over all leases: part of the client CPU
	CloseSec        float64 // Manager.Close: releasing them all
	Error           string  // what ran out first; empty when nothing failed
	Series          []millionSample
}

func runMillion(ctx context.Context, cfg runConfig, srv *redistest.Server) ([]millionResult, error) {
	admin := redis.NewClient(srv.Options())
	defer admin.Close()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	runtime.GC()
	r, err := holdMillion(ctx, srv.Addr(), admin, cfg.million)
	// Later scenarios should not share the server with a million keys.
	if ferr := admin.FlushAll(ctx).Err(); err == nil {
		err = ferr
	}
	if err != nil {
		return nil, err
	}
	cfg.logf("  million n=%d/%d: acquire %.1fs, +%d→%d goroutines, %.0f/%.0f B/lease (held/end), %.0f renewals/s, late %v, lost %d, cpu %.3f s/s (redis %.3f), redis +%.0f MB (%.0f B/lease), %.0f trips/s, %.0f cmds/s, close %.1fs%s",
		r.Leases, r.Target, r.AcquireSec, r.GoroutinesEarly, r.Goroutines, r.BytesHeld, r.BytesEnd, r.RenewSec, r.Lateness.Round(time.Millisecond), r.Lost,
		r.CPUSec, r.RedisCPU, float64(r.RedisMem)/1e6, r.RedisMemLease, r.TripsSec, r.CmdsSec, r.CloseSec, errSuffix(r.Error))
	return []millionResult{r}, nil
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return "; FAILED: " + e
}

// holdMillion returns an error only when the harness itself could not run;
// a failure of what is measured (an acquire error, a lost lease) is in the
// result, with how far it got.
func holdMillion(ctx context.Context, addr string, admin *redis.Client, mc millionCase) (millionResult, error) {
	r := millionResult{Target: mc.Leases, TTL: millionTTL, Interval: millionInterval}
	rmem0, err := infoInt(ctx, admin, "memory", "used_memory")
	if err != nil {
		return r, err
	}
	c, h := newClient(addr, acquirers)
	defer c.Close()
	// The harness's own per-lease arrays exist before the baseline, so that
	// bytes/lease is what the library keeps.
	mh := newMillionHeld(mc.Leases)
	mem0, g0 := memInUse(), runtime.NumGoroutine()
	m, err := lease.New(c, lease.WithTTL(millionTTL), lease.WithRenewInterval(millionInterval), lease.WithLogger(quietLogger))
	if err != nil {
		return r, err
	}
	defer m.Close()
	mh.acquire(ctx, m, g0, &r)
	if r.Leases == 0 {
		return r, nil
	}
	mem1, g1 := memInUse(), settledGoroutines()
	r.Goroutines = g1 - g0
	r.BytesHeld = float64(mem1-mem0) / float64(r.Leases)
	rmem1, err := infoInt(ctx, admin, "memory", "used_memory")
	if err != nil {
		return r, err
	}
	r.RedisMem = rmem1 - rmem0
	r.RedisMemLease = float64(r.RedisMem) / float64(r.Leases)
	mh.watch(ctx, admin, h, mc.Window, &r)
	r.BytesEnd = float64(memInUse()-mem0) / float64(r.Leases)
	runtime.KeepAlive(mh.leases)
	c0 := time.Now()
	cerr := m.Close()
	r.CloseSec = time.Since(c0).Seconds()
	if cerr != nil && r.Error == "" {
		r.Error = "close: " + cerr.Error()
	}
	return r, nil
}

// millionHeld is the harness's own record of the leases: each lease, and
// the send time of its acquisition.
type millionHeld struct {
	leases []*lease.Lease
	start  []time.Time
	drift  time.Duration
}

func newMillionHeld(n int) *millionHeld {
	return &millionHeld{leases: make([]*lease.Lease, n), start: make([]time.Time, n),
		drift: time.Duration(float64(millionTTL)*lease.DefaultDriftFactor) + lease.DefaultDriftExtra}
}

// sent is when l's last renewal (or acquisition) was sent, as its deadline
// says.
func (mh *millionHeld) sent(l *lease.Lease) time.Time { return l.Deadline().Add(mh.drift - millionTTL) }

// acquire takes every lease on m from 64 goroutines, and counts the
// goroutines added (since g0) once 1% are held. The first error stops the
// acquirers: it keeps what they got, and the error is in r.
func (mh *millionHeld) acquire(ctx context.Context, m *lease.Manager, g0 int, r *millionResult) {
	n := len(mh.leases)
	one := func(i int) error {
		// One allocation, the name the lease keeps; fmt.Sprint would box i
		// and copy twice.
		var buf [24]byte
		l, err := m.TryAcquire(ctx, string(strconv.AppendInt(append(buf[:0], "m-"...), int64(i), 10)))
		if err != nil {
			return fmt.Errorf("acquiring lease %d: %w", i, err)
		}
		mh.leases[i], mh.start[i] = l, mh.sent(l)
		return nil
	}
	t0 := time.Now()
	// Goroutines at 1% and at 100% of N: equal if they do not grow with N.
	early := max(n/100, 1)
	err := parallel(early, acquirers, one)
	r.GoroutinesEarly = settledGoroutines() - g0
	if err == nil {
		err = parallel(n-early, acquirers, func(i int) error { return one(early + i) })
	}
	r.AcquireSec = time.Since(t0).Seconds()
	if err != nil {
		r.Error = err.Error()
		mh.keepAcquired()
	}
	r.Leases = len(mh.leases)
}

// keepAcquired drops the leases never acquired.
func (mh *millionHeld) keepAcquired() {
	k := 0
	for i, l := range mh.leases {
		if l != nil {
			mh.leases[k], mh.start[k] = l, mh.start[i]
			k++
		}
	}
	mh.leases, mh.start = mh.leases[:k], mh.start[:k]
}

// sample observes every lease's last renewal and returns how many are lost.
func (mh *millionHeld) sample(lt *lateness) (lost int) {
	for i, l := range mh.leases {
		lt.observe(i, mh.sent(l))
		if l.Err() != nil {
			lost++
		}
	}
	return lost
}

// watch holds the leases for window, sampling them every millionEvery into
// r's time series, and fills in r's totals over the window.
func (mh *millionHeld) watch(ctx context.Context, admin *redis.Client, h *counter, window time.Duration, r *millionResult) {
	lt := newLateness(len(mh.leases), millionInterval, mh.start)
	h.reset()
	// As watchWindow does: only what happens inside the window counts.
	mh.sample(lt)
	lt.renewals, lt.worst = 0, -lt.interval
	cpu0, rc0, w0 := cpuTime(), redisCPU(ctx, admin), time.Now()
	tick := time.NewTicker(millionEvery)
	defer tick.Stop()
	var (
		prevRen  int64
		prevT    = w0
		sampling time.Duration
		ms       runtime.MemStats
	)
	// Counting ticks, not racing a timer for the window's end, keeps the
	// last interval as long as the others.
	for range int(window / millionEvery) {
		<-tick.C
		s0 := time.Now()
		lost := mh.sample(lt)
		sampling += time.Since(s0)
		runtime.ReadMemStats(&ms)
		late := lt.worst
		if lt.renewals == 0 {
			late = 0
		}
		r.Series = append(r.Series, millionSample{
			T:        s0.Sub(w0).Seconds(),
			RenewSec: float64(lt.renewals-prevRen) / s0.Sub(prevT).Seconds(),
			HeapMB:   float64(ms.HeapAlloc) / 1e6,
			Lost:     lost,
			Late:     late,
		})
		prevRen, prevT = lt.renewals, s0
		r.Lost = lost
	}
	el := time.Since(w0)
	cpu, rc := cpuTime()-cpu0, redisCPU(ctx, admin)-rc0
	r.Window = el
	r.TripsSec = float64(h.trips.Load()) / el.Seconds()
	r.CmdsSec = float64(h.cmds.Load()) / el.Seconds()
	r.CPUSec = cpu.Seconds() / el.Seconds()
	r.RedisCPU = rc / el.Seconds()
	r.Renewals, r.RenewSec, r.Lateness = lt.renewals, float64(lt.renewals)/el.Seconds(), lt.worst
	if len(r.Series) > 0 {
		r.SampleMs = sampling.Seconds() * 1e3 / float64(len(r.Series))
	}
}

// settledGoroutines is runtime.NumGoroutine once goroutines that just
// finished (parallel's, past their wg.Done) have exited.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// infoInt returns one integer field of an INFO section.
func infoInt(ctx context.Context, admin *redis.Client, section, field string) (int64, error) {
	s, err := admin.Info(ctx, section).Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO %s: no %s", section, field)
}

// millionFailures are the scenario's failures: leases it could not acquire,
// and leases lost.
func millionFailures(rs []millionResult) []string {
	var out []string
	for _, m := range rs {
		if m.Error != "" {
			out = append(out, fmt.Sprintf("scenario 5: stopped at %d of %d leases: %s", m.Leases, m.Target, m.Error))
		}
		if m.Lost > 0 {
			out = append(out, fmt.Sprintf("scenario 5: tenure lost %d of %d leases", m.Lost, m.Leases))
		}
	}
	return out
}

// millionTarget is the process's budget a lease.
const millionTarget = 600

func millionSection(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## 5. Million leases\n\n")
	ttl, interval := 30*time.Second, 10*time.Second
	if len(r.Million) > 0 {
		ttl, interval = r.Million[0].TTL, r.Million[0].Interval
	}
	p("One process, one `lease.Manager`, acquires N leases with TryAcquire from 64 goroutines (TTL %v, renewed every %v: N/%.3g renewals a second) and holds them for the window. ", ttl, interval.Round(time.Millisecond), interval.Seconds())
	p("Memory = heap + goroutine stacks added per lease after GC, once all are held and again at the end of the window; the harness's own per-lease arrays are allocated before the baseline, so it is what the library keeps (the name string included). ")
	p("Goroutines added are counted once 1%% of the leases are held and once all are. Lateness and lost are read as in scenario 3, every 2s; ")
	p("client CPU includes that pass over all leases (mean time shown). Redis memory = INFO memory `used_memory` after acquiring all − after FLUSHALL.\n\n")
	for _, m := range r.Million {
		if m.Error != "" || m.Lost > 0 {
			p("**FAILED:** held %d of %d leases", m.Leases, m.Target)
			if m.Lost > 0 {
				p(", **lost %d**", m.Lost)
			}
			if m.Error != "" {
				p("; what ran out first: `%s`", m.Error)
			}
			p("\n\n")
		}
	}
	p("| leases held / asked | window | acquire all | goroutines added (1%% → all) | bytes/lease held | bytes/lease at end | renewals/s (schedule) | worst lateness | lost | client CPU s/s | sampling pass | round trips/s | commands/s | release all (Close) |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Million {
		late := dur(m.Lateness)
		if m.Renewals == 0 {
			late = "– (no renewal)"
		}
		p("| %d / %d | %v | %.1fs | %d → %d | %.0f | %.0f | %.0f (%.0f) | %s | %d | %.3f | %.0fms | %.0f | %.0f | %.1fs |\n",
			m.Leases, m.Target, m.Window.Round(time.Second), m.AcquireSec, m.GoroutinesEarly, m.Goroutines, m.BytesHeld, m.BytesEnd,
			m.RenewSec, float64(m.Leases)/m.Interval.Seconds(), late, m.Lost, m.CPUSec, m.SampleMs, m.TripsSec, m.CmdsSec, m.CloseSec)
	}
	p("\nThe Redis side, same run:\n\n| leases | used_memory added | per lease | Redis CPU s/s | Redis CPU per renewal |\n|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Million {
		perRenewal := "–"
		if m.RenewSec > 0 {
			perRenewal = fmt.Sprintf("%.1fµs", m.RedisCPU/m.RenewSec*1e6)
		}
		p("| %d | %.0f MB | %.0f B | %.3f | %s |\n", m.Leases, float64(m.RedisMem)/1e6, m.RedisMemLease, m.RedisCPU, perRenewal)
	}
	p("\nTarget: at most %d bytes a lease in the process, zero lost, goroutines constant in N.\n\n", millionTarget)
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	for _, m := range r.Million {
		p("- %d of %d leases acquired: %s; bytes/lease %.0f held, %.0f at end: %s; lost %d: %s; goroutines %d at 1%%, %d at all: %s\n",
			m.Leases, m.Target, met(m.Leases == m.Target && m.Error == ""),
			m.BytesHeld, m.BytesEnd, met(max(m.BytesHeld, m.BytesEnd) <= millionTarget),
			m.Lost, met(m.Lost == 0), m.GoroutinesEarly, m.Goroutines, met(m.GoroutinesEarly == m.Goroutines))
	}
	p("\n![million](million.png)\n")
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
	return saveColumn(file, rows, 8*vg.Inch, 3*vg.Inch)
}
