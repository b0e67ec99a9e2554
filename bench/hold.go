package main

// Scenario 3, the watchdog at scale: one process holds N leases (1,000 to
// 100,000 by mode; acquired by 64 goroutines with TryAcquire) for a few
// renewal intervals, at TTL 30s renewed every 10s and at TTL 3s renewed
// every second. tenure, which batches renewals (renew_leases.lua), against
// tenure-per-item (the same library behind a client type its backend does
// not know: one renew.lua call a lease) and against the hand-written
// alternative, a goroutine per lease calling redislock's Refresh on a
// ticker. It measures goroutines and bytes added per lease, renewals, round
// trips and commands a second, client and Redis CPU, the worst renewal
// lateness and the leases lost; tenure losing one fails the run (hold.png).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// holdCase is one row of the scenario: Leases held at TTL, renewed every
// Interval, watched for Hold.
type holdCase struct {
	Leases   int
	TTL      time.Duration
	Interval time.Duration
	Hold     time.Duration
}

type holdResult struct {
	Impl       string
	Leases     int
	TTL        time.Duration
	Interval   time.Duration
	Hold       time.Duration // the measured window
	AcquireSec float64       // time to acquire them all, 64 goroutines
	Goroutines int           // added while holding
	BytesLease float64       // heap + goroutine stacks added, per lease
	TripsSec   float64       // round trips a second while holding
	CmdsSec    float64       // commands a second while holding
	CPUSec     float64       // client CPU seconds per second (getrusage)
	RedisCPU   float64       // server CPU seconds per second (INFO cpu)
	Lateness   time.Duration // worst renewal lateness against its schedule
	Renewals   int64         // renewals observed in the window
	RenewSec   float64       // renewals a second observed
	Lost       int
	// Refused is how many acquisitions the library refused with
	// lease.ErrOverloaded because renewals of those it held ran late: the
	// run then holds the others.
	Refused int
}

func refreshImpl() impl {
	return impl{Name: "redislock-refresh", Note: "hand-written: one goroutine per lease calling redislock Lock.Refresh on a time.Ticker"}
}

func runHold(ctx context.Context, cfg runConfig, srv *redistest.Server) ([]holdResult, error) {
	admin := redis.NewClient(srv.Options())
	defer admin.Close()
	var out []holdResult
	for i, hc := range cfg.holds {
		order := []string{"tenure", "tenure-per-item", "redislock-refresh"}
		for range i % 3 {
			order = append(order[1:], order[0])
		}
		for _, name := range order {
			if err := admin.FlushAll(ctx).Err(); err != nil {
				return out, err
			}
			runtime.GC()
			var (
				r   holdResult
				err error
			)
			if name != "redislock-refresh" {
				r, err = holdTenure(ctx, cfg, srv.Addr(), admin, hc, name == "tenure-per-item")
			} else {
				r, err = holdRefresh(ctx, cfg, srv.Addr(), admin, hc)
			}
			if err != nil {
				return out, fmt.Errorf("hold %s %d: %w", name, hc.Leases, err)
			}
			cfg.logf("  hold %-17s n=%-6d ttl %-4v: acquire %.1fs, +%d goroutines, %.0f B/lease, %.0f renewals/s, %.0f trips/s, %.0f cmds/s, cpu %.3f s/s (redis %.3f), late %v, lost %d, refused %d",
				r.Impl, r.Leases, r.TTL, r.AcquireSec, r.Goroutines, r.BytesLease, r.RenewSec, r.TripsSec, r.CmdsSec, r.CPUSec, r.RedisCPU, r.Lateness.Round(time.Millisecond), r.Lost, r.Refused)
			out = append(out, r)
		}
	}
	return out, nil
}

// watchWindow samples every lease's last send time every interval/5 until
// the window ends, then returns the measurements of the window.
func watchWindow(ctx context.Context, admin *redis.Client, h *counter, hc holdCase, lt *lateness, sample func(lt *lateness)) (holdResult, time.Duration) {
	h.reset()
	// Count only what happens inside the window: acquiring many leases
	// takes seconds, and the first leases renew meanwhile.
	sample(lt)
	lt.renewals, lt.worst = 0, -lt.interval
	cpu0, rc0, t0 := cpuTime(), redisCPU(ctx, admin), time.Now()
	tick := time.NewTicker(hc.Interval / 5)
	defer tick.Stop()
	end := time.After(hc.Hold)
loop:
	for {
		select {
		case <-tick.C:
			sample(lt)
		case <-end:
			break loop
		}
	}
	sample(lt)
	el := time.Since(t0)
	cpu, rc := cpuTime()-cpu0, redisCPU(ctx, admin)-rc0
	return holdResult{
		Leases: hc.Leases, TTL: hc.TTL, Interval: hc.Interval, Hold: el,
		TripsSec: float64(h.trips.Load()) / el.Seconds(),
		CmdsSec:  float64(h.cmds.Load()) / el.Seconds(),
		CPUSec:   cpu.Seconds() / el.Seconds(),
		RedisCPU: rc / el.Seconds(),
		Lateness: lt.worst, Renewals: lt.renewals, RenewSec: float64(lt.renewals) / el.Seconds(),
	}, el
}

// holdTenure holds hc's leases with one lease.Manager; perItem renews them
// one script call each (perItemClient).
func holdTenure(ctx context.Context, cfg runConfig, addr string, admin *redis.Client, hc holdCase, perItem bool) (holdResult, error) {
	c, h := newClient(addr, acquirers)
	defer c.Close()
	var client redis.UniversalClient = c
	if perItem {
		client = perItemClient{c}
	}
	mem0, g0 := memInUse(), runtime.NumGoroutine()
	m, err := lease.New(client, lease.WithTTL(hc.TTL), lease.WithRenewInterval(hc.Interval), lease.WithLogger(quietLogger))
	if err != nil {
		return holdResult{}, err
	}
	defer m.Close()
	leases := make([]*lease.Lease, hc.Leases)
	start := make([]time.Time, hc.Leases)
	drift := time.Duration(float64(hc.TTL)*lease.DefaultDriftFactor) + lease.DefaultDriftExtra
	sentOf := func(l *lease.Lease) time.Time { return l.Deadline().Add(drift - hc.TTL) }
	t0 := time.Now()
	var refused atomic.Int64
	err = parallel(hc.Leases, acquirers, func(i int) error {
		l, err := m.TryAcquire(ctx, fmt.Sprint("hold-", i))
		if errors.Is(err, lease.ErrOverloaded) {
			refused.Add(1)
			start[i] = time.Now()
			return nil
		}
		if err != nil {
			return err
		}
		leases[i], start[i] = l, sentOf(l)
		return nil
	})
	if err != nil {
		return holdResult{}, err
	}
	acq := time.Since(t0)
	mem1, g1 := memInUse(), runtime.NumGoroutine()
	lt := newLateness(hc.Leases, hc.Interval, start)
	r, _ := watchWindow(ctx, admin, h, hc, lt, func(lt *lateness) {
		for i, l := range leases {
			if l != nil {
				lt.observe(i, sentOf(l))
			}
		}
	})
	r.Impl, r.AcquireSec = "tenure", acq.Seconds()
	if perItem {
		r.Impl = "tenure-per-item"
	}
	r.Goroutines = g1 - g0
	r.BytesLease = float64(mem1-mem0) / float64(hc.Leases)
	r.Refused = int(refused.Load())
	for _, l := range leases {
		if l != nil && l.Err() != nil {
			r.Lost++
		}
	}
	runtime.KeepAlive(leases)
	return r, m.Close()
}

// holdRefresh is the hand-written alternative: one goroutine per lease
// calling redislock's Refresh on a ticker.
func holdRefresh(ctx context.Context, cfg runConfig, addr string, admin *redis.Client, hc holdCase) (holdResult, error) {
	c, h := newClient(addr, acquirers)
	defer c.Close()
	mem0, g0 := memInUse(), runtime.NumGoroutine()
	rl := redislock.New(c)
	locks := make([]*redislock.Lock, hc.Leases)
	sent := make([]atomic.Int64, hc.Leases) // unix nanos of the last successful renewal's send
	start := make([]time.Time, hc.Leases)
	var lost atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	err := parallel(hc.Leases, acquirers, func(i int) error {
		s := time.Now()
		l, err := rl.Obtain(ctx, fmt.Sprint("hold-", i), hc.TTL, nil)
		if err != nil {
			return err
		}
		locks[i], start[i] = l, s
		sent[i].Store(s.UnixNano())
		wg.Add(1)
		go func() {
			defer wg.Done()
			refreshLoop(ctx, l, hc, &sent[i], &lost, stop)
		}()
		return nil
	})
	if err != nil {
		close(stop)
		wg.Wait()
		return holdResult{}, err
	}
	acq := time.Since(t0)
	mem1, g1 := memInUse(), runtime.NumGoroutine()
	lt := newLateness(hc.Leases, hc.Interval, start)
	r, _ := watchWindow(ctx, admin, h, hc, lt, func(lt *lateness) {
		for i := range sent {
			lt.observe(i, time.Unix(0, sent[i].Load()))
		}
	})
	close(stop)
	wg.Wait()
	r.Impl, r.AcquireSec = "redislock-refresh", acq.Seconds()
	r.Goroutines = g1 - g0
	r.BytesLease = float64(mem1-mem0) / float64(hc.Leases)
	r.Lost = int(lost.Load())
	_ = parallel(hc.Leases, acquirers, func(i int) error { return locks[i].Release(ctx) })
	return r, nil
}

// refreshLoop renews l every interval until stop is closed, the hand-written
// way, recording the send time of each renewal that succeeded; a lease it
// finds expired, or that Refresh finds gone, is lost.
func refreshLoop(ctx context.Context, l *redislock.Lock, hc holdCase, sent, lost *atomic.Int64, stop <-chan struct{}) {
	t := time.NewTicker(hc.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s := time.Now()
		if s.Sub(time.Unix(0, sent.Load())) >= hc.TTL {
			lost.Add(1) // the lease expired before we could renew
			return
		}
		rctx, cancel := context.WithTimeout(ctx, hc.Interval)
		err := l.Refresh(rctx, hc.TTL, nil)
		cancel()
		switch {
		case err == nil:
			sent.Store(s.UnixNano())
		case errors.Is(err, redislock.ErrNotObtained):
			lost.Add(1)
			return
		}
	}
}

// holdFailures are the scenario's safety failures: a lease tenure lost.
func holdFailures(rs []holdResult) []string {
	var out []string
	for _, h := range rs {
		if h.Lost > 0 && h.Impl == "tenure" {
			out = append(out, fmt.Sprintf("scenario 3: tenure lost %d of %d leases (ttl %v)", h.Lost, h.Leases, h.TTL))
		}
	}
	return out
}

func holdSection(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## 3. Watchdog at scale\n\n")
	p("One process holds N leases (acquired by 64 goroutines with TryAcquire / Obtain) and keeps them for the window shown. ")
	p("Memory = heap + goroutine stacks added, per lease, after GC. CPU = this process's user+system time (getrusage) per second of the window; ")
	p("Redis CPU = the server's (INFO cpu). Lateness = the worst delay of a renewal's send past its schedule (previous renewal + interval), ")
	p("observed from `Lease.Deadline` for tenure and from the loop's own record for the hand-written one; lost = leases whose context ended (tenure) or whose ")
	p("Refresh found the key gone or came after the TTL (hand-written).\n\n")
	p("| leases | TTL / interval | implementation | acquire all | goroutines added | bytes/lease | renewals/s | round trips/s | commands/s | client CPU s/s | Redis CPU s/s | worst lateness | lost |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, h := range r.Hold {
		p("| %d | %v / %v | %s | %.1fs | %d | %.0f | %.0f | %.0f | %.0f | %.3f | %.3f | %s | %s |\n", h.Leases, h.TTL, h.Interval, h.Impl, h.AcquireSec, h.Goroutines, h.BytesLease, h.RenewSec, h.TripsSec, h.CmdsSec, h.CPUSec, h.RedisCPU, dur(h.Lateness), lostRefused(h.Lost, h.Refused))
	}
	p("\nClient CPU, hand-written ÷ tenure:\n\n| leases | TTL | ratio |\n|---:|---|---:|\n")
	for _, t := range filter(r.Hold, func(h holdResult) bool { return h.Impl == "tenure" }) {
		for _, o := range filter(r.Hold, func(h holdResult) bool {
			return h.Impl == "redislock-refresh" && h.Leases == t.Leases && h.TTL == t.TTL
		}) {
			p("| %d | %v | %s |\n", t.Leases, t.TTL, ratio(o.CPUSec/t.CPUSec))
		}
	}
	p("\nRedis CPU per lease renewed (Redis CPU s/s ÷ renewals/s, the server's idle work included): tenure, which renews plain leases ")
	p("up to 256 to a `renew_leases.lua` call, against tenure-per-item (the same library behind a client type the backend does not know, so ")
	p("that it renews each lease with its own `renew.lua` call, as before) and the hand-written loop, in the same run:\n\n")
	p("| leases | TTL | tenure µs/renewal | tenure-per-item µs/renewal | ratio | hand-written µs/renewal |\n|---:|---|---:|---:|---:|---:|\n")
	perRenewal := func(h holdResult) float64 { return h.RedisCPU / max(h.RenewSec, 1) * 1e6 }
	for _, t := range filter(r.Hold, func(h holdResult) bool { return h.Impl == "tenure" }) {
		same := func(impl string) (holdResult, bool) {
			for _, o := range r.Hold {
				if o.Impl == impl && o.Leases == t.Leases && o.TTL == t.TTL {
					return o, true
				}
			}
			return holdResult{}, false
		}
		pi, ok1 := same("tenure-per-item")
		hw, ok2 := same("redislock-refresh")
		if !ok1 || !ok2 {
			continue
		}
		p("| %d | %v | %.1f | %.1f | %s | %.1f |\n", t.Leases, t.TTL, perRenewal(t), perRenewal(pi), ratio(perRenewal(t)/perRenewal(pi)), perRenewal(hw))
	}
	p("\n![hold](hold.png)\n\n")
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
