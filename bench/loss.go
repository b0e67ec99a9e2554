package main

// Scenario 4, loss detection: a tenure holder reaches Redis through an
// in-process proxy that is black-holed at a random moment of the renewal
// interval, while a second client polls the key's PTTL every ~1ms. The
// margin is the server's expiry (a lower bound) minus the moment the
// holder's context was cancelled: it must never be negative (a negative one
// fails the run); tenure aims for TTL·1% + 2ms. Only tenure is measured:
// its peers have no context to cancel (loss.png).

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"math/rand/v2"
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

// lossCase is one TTL of the scenario and how many trials it gets.
type lossCase struct {
	ttl    time.Duration
	trials int
}

type lossTrial struct {
	TTL    time.Duration
	Margin time.Duration // server expiry (a lower bound) minus cancellation
	Cause  string
}

type lossResult struct {
	TTL                 time.Duration
	Trials              int
	Min, Median, Max    time.Duration
	Drift               time.Duration // the configured margin: ttl*1% + 2ms
	Negative            int
	Margins             []time.Duration
	Causes              map[string]int
	MeanSampleInterval  time.Duration
	MaxExpiryUncertaint time.Duration
}

func runLoss(ctx context.Context, cfg runConfig, addr string) ([]lossResult, error) {
	watcher := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer watcher.Close()
	var out []lossResult
	for _, tc := range cfg.lossTTLs {
		res := lossResult{TTL: tc.ttl, Drift: time.Duration(float64(tc.ttl)*lease.DefaultDriftFactor) + lease.DefaultDriftExtra, Causes: map[string]int{}}
		var ms []float64
		var unc time.Duration
		for i := range tc.trials {
			tr, u, err := lossOnce(ctx, addr, watcher, tc.ttl, fmt.Sprintf("loss-%v-%d", tc.ttl, i))
			if err != nil {
				return out, err
			}
			unc = max(unc, u)
			res.Margins = append(res.Margins, tr.Margin)
			res.Causes[tr.Cause]++
			ms = append(ms, float64(tr.Margin))
			if tr.Margin < 0 {
				res.Negative++
			}
		}
		res.Trials = len(ms)
		lo, hi := minMax(ms)
		res.Min, res.Max, res.Median = time.Duration(lo), time.Duration(hi), time.Duration(median(ms))
		res.MaxExpiryUncertaint = unc
		cfg.logf("  loss ttl %v: %d trials, margin min %v median %v max %v (drift %v), negative %d, causes %v",
			tc.ttl, res.Trials, res.Min, res.Median, res.Max, res.Drift, res.Negative, res.Causes)
		out = append(out, res)
	}
	return out, nil
}

// lossOnce acquires one lease through a fresh proxy, black-holes it at a
// random phase of the renewal interval, and compares the cancellation time
// with the server's expiry as seen by a watcher polling PTTL every ~1ms.
//
// The expiry estimate is a lower bound: for a PTTL reply p to a request sent
// at s, the key expires no earlier than s+p (rounded down to the
// millisecond); the bound is the latest such value over all samples. It also
// returns the gap between that bound and the first sample that found the key
// gone, an upper bound on the estimate's error.
func lossOnce(ctx context.Context, addr string, watcher *redis.Client, ttl time.Duration, name string) (lossTrial, time.Duration, error) {
	p, err := redistest.NewProxy(addr)
	if err != nil {
		return lossTrial{}, 0, err
	}
	defer p.Close()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, DialTimeout: time.Second, ReadTimeout: ttl, WriteTimeout: ttl})
	defer c.Close()
	m, err := lease.New(c, lease.WithTTL(ttl), lease.WithLogger(quietLogger), lease.WithOpTimeout(ttl))
	if err != nil {
		return lossTrial{}, 0, err
	}
	defer m.Close()
	l, err := m.TryAcquire(ctx, name)
	if err != nil {
		return lossTrial{}, 0, err
	}
	key := lease.DefaultKeyPrefix + "{" + name + "}"
	cancelled := make(chan time.Time, 1)
	go func() {
		<-l.Done()
		cancelled <- time.Now()
	}()

	// Watch the key from the start so that every renewal's effect is seen.
	stop := make(chan struct{})
	watched := watchPTTL(ctx, watcher, key, stop)

	interval := ttl / 3
	time.Sleep(interval/2 + rand.N(interval))
	p.BlackHole(true)

	var at time.Time
	select {
	case at = <-cancelled:
	case <-time.After(3 * ttl):
		close(stop)
		return lossTrial{}, 0, errors.New("loss: lease not cancelled within 3 TTLs of the black hole")
	}
	var ss []pttlSample
	select {
	case ss = <-watched:
	case <-time.After(3 * ttl):
		close(stop)
		return lossTrial{}, 0, errors.New("loss: key did not expire within 3 TTLs")
	}
	p.BlackHole(false)
	bound, gone := expiryBounds(ss)
	if bound.IsZero() || gone.IsZero() {
		return lossTrial{}, 0, errors.New("loss: watcher saw no expiry")
	}
	return lossTrial{TTL: ttl, Margin: bound.Sub(at), Cause: lossCause(l)}, gone.Sub(bound), nil
}

// A pttlSample is one PTTL reply and when its request was sent.
type pttlSample struct {
	sent time.Time
	pttl time.Duration
}

// watchPTTL polls key's PTTL every ~1ms until the key is gone or stop is
// closed, then sends what it saw.
func watchPTTL(ctx context.Context, watcher *redis.Client, key string, stop <-chan struct{}) <-chan []pttlSample {
	watched := make(chan []pttlSample, 1)
	go func() {
		var ss []pttlSample
		for {
			sent := time.Now()
			d, err := watcher.PTTL(ctx, key).Result()
			if err == nil {
				ss = append(ss, pttlSample{sent, d})
				if d < 0 { // -2: gone
					break
				}
			}
			select {
			case <-stop:
				watched <- ss
				return
			case <-time.After(time.Millisecond):
			}
		}
		watched <- ss
	}()
	return watched
}

// expiryBounds returns the server's expiry as the latest send time + PTTL
// over the samples (a lower bound), and the first sample that found the key
// gone; zero times when there was no such sample.
func expiryBounds(ss []pttlSample) (bound, gone time.Time) {
	for _, s := range ss {
		if s.pttl >= 0 {
			if e := s.sent.Add(s.pttl); e.After(bound) {
				bound = e
			}
		} else if gone.IsZero() {
			gone = s.sent
		}
	}
	return bound, gone
}

// lossCause names why l's context ended.
func lossCause(l *lease.Lease) string {
	switch c := context.Cause(l.Context()); {
	case errors.Is(c, lease.ErrLost):
		return "ErrLost"
	case c != nil:
		return c.Error()
	}
	return "other"
}

// lossFailures are the scenario's safety failures: a context cancelled
// after the server's expiry.
func lossFailures(rs []lossResult) []string {
	var out []string
	for _, l := range rs {
		if l.Negative > 0 {
			out = append(out, fmt.Sprintf("scenario 4: %d of %d trials cancelled after the server's expiry (ttl %v, min margin %v)", l.Negative, l.Trials, l.TTL, l.Min))
		}
	}
	return out
}

func lossSection(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## 4. Loss detection\n\n")
	p("A tenure holder talks to Redis through a proxy that is black-holed at a random moment; a second client polls the key's PTTL every ~1ms. ")
	p("Margin = the server's expiry (a lower bound: the latest send time + PTTL over all samples) − the moment the holder's context was cancelled. ")
	p("It must never be negative; the configured margin (drift) is TTL·1%% + 2ms. Only tenure is measured: its peers have no context to cancel.\n\n")
	p("| TTL | trials | drift | margin min | median | max | negative | causes |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, l := range r.Loss {
		p("| %v | %d | %s | %s | %s | %s | %d | %v |\n", l.TTL, l.Trials, dur(l.Drift), dur(l.Min), dur(l.Median), dur(l.Max), l.Negative, l.Causes)
	}
	p("\n![loss](loss.png)\n")
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
