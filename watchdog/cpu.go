package watchdog

import (
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// The CPU probe: whether the process is short of CPU, the fact that says
// which batches measure the watchdog's capacity (capacity.go).
//
// Its contract: the process is short of CPU when, since the probe last
// looked, at least cpuShortShare of the times a goroutine became runnable
// it waited cpuShortWait or longer to run (the Go runtime's
// /sched/latencies:seconds). That is what a process whose cores are all
// busy shows, with its own goroutines or with other processes' threads
// taking the cores from under it; a process that waits on its server shows
// latencies of microseconds. A look covers at least cpuProbeSpan, so that
// a few scheduling events say nothing alone; until the first look the
// process counts as short of CPU, the cautious answer.

const (
	cpuShortWait  = time.Millisecond
	cpuShortShare = 0.05
	cpuProbeSpan  = 200 * time.Millisecond
)

// cpuProbe reads the scheduling latencies and keeps the last verdict.
type cpuProbe struct {
	mu      sync.Mutex
	at      time.Time // when the counts were read
	counts  []uint64  // the histogram's counts then
	read    []metrics.Sample
	ok      atomic.Bool // a verdict exists
	isShort atomic.Bool
	pinned  bool // the verdict is a test's (pin), not looked at again
}

// pin sets the verdict for good: for tests, whose scheduling latencies say
// nothing of the machine they model.
func (p *cpuProbe) pin(short bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pinned = true
	p.isShort.Store(short)
	p.ok.Store(true)
}

// short reports the last verdict: true until there is one.
func (p *cpuProbe) short() bool { return !p.ok.Load() || p.isShort.Load() }

// sample looks again if cpuProbeSpan has passed since the last look, and
// updates the verdict from the latencies since then.
func (p *cpuProbe) sample() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.pinned || !p.at.IsZero() && now.Sub(p.at) < cpuProbeSpan {
		return
	}
	if p.read == nil {
		p.read = []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	}
	metrics.Read(p.read)
	if p.read[0].Value.Kind() != metrics.KindFloat64Histogram {
		return // not measured by this runtime: stay cautious
	}
	h := p.read[0].Value.Float64Histogram()
	if len(p.counts) == len(h.Counts) {
		var all, slow uint64
		for i, c := range h.Counts {
			d := c - p.counts[i]
			all += d
			if h.Buckets[i] >= cpuShortWait.Seconds() {
				slow += d
			}
		}
		if all > 0 {
			p.isShort.Store(float64(slow) >= cpuShortShare*float64(all))
			p.ok.Store(true)
		}
	}
	p.counts = append(p.counts[:0], h.Counts...)
	p.at = now
}
