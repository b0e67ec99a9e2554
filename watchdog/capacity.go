package watchdog

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// The load: whether the watchdog is behind, the one answer a caller acts on
// (it refuses new leases while Behind is true) and the condition under
// which the watchdog sheds a renewal (shed.go).
//
// Its contract: Behind is true on one of three facts, never on an
// estimate of a link's speed alone. The first two say that the watchdog
// itself cannot send what its leases call for (overloaded): only then does
// it shed (shed.go). The third says that the server or the link is slow:
// new leases wait, but nothing is shed, since every renewal sent may still
// be answered in time.
//
//   - Demand over capacity. The renewals a second that the leases held call
//     for (the sum of 1/interval, kept exactly as leases come and go) exceed
//     three quarters of what Config.Parallel workers renew a second. A
//     worker's rate is measured from its full batches, and is the server's
//     and this process's, not the link's: the part of a round trip that
//     is the link's (seen from batches of different sizes) is not counted
//     as work, for every worker waits it at once, up to Config.Workers
//     batches in flight. Counting a 200ms link as work at Parallel 1 of 4
//     workers said 4,000 renewals a second were over capacity where the
//     workers carried three times as many. Which batches count
//     depends on what slows them. A batch that shared its time with an
//     acquisition storm (more leases added while it was out than a tenth of
//     its size) measures the storm, not the renewals: while the process
//     has CPU to spare, the storm slows renewals only through the server,
//     which the storm stops taking once the facts below refuse it, so only
//     batches without one count, and before the first of them the
//     capacity is unknown and only the facts below refuse. While the
//     process is short of CPU (its goroutines wait to run: cpu.go), every
//     batch counts: the acquisitions, admitted or refused, keep taking the
//     CPU the renewals need, and a capacity measured without them would
//     admit leases that the process then loses.
//   - A renewal kept waiting for a worker. A lease has waited unsent a
//     third of the time between when its renewal could first be sent (it
//     fell due, or its previous attempt was answered after that) and its
//     loss, at least minLate: a renewal that a server's stall delayed is
//     not late for the watchdog, one that its own scheduler delayed is.
//   - A renewal kept waiting for its answer: a batch unanswered a third of
//     the time between when it was sent and its earliest loss. It ends
//     with the answer: a lease whose answer came in time is never counted
//     behind for that answer's delay.

// load is the watchdog's share of state for Behind. The demand is guarded
// by the watchdog's mutex; the rest is read without it.
type load struct {
	// demand is how many renewals a second the leases held call for,
	// published in demandBits for Behind (float64 bits).
	demand     float64
	demandBits atomic.Uint64
	// perWorker is how many renewals a second one worker sends when it
	// has a full batch, a moving average over every such batch; quiet is
	// the same over those batches that did not share their time with an
	// acquisition storm. Float64 bits, 0 until measured.
	perWorker atomic.Uint64
	quiet     atomic.Uint64
	// link is the link's share of a round trip, in nanoseconds
	// (workRate), float64 bits, 0 until a pair of batches showed one.
	link atomic.Uint64
	// adds counts the leases ever added: a batch compares it before and
	// after to see whether acquisitions competed with it.
	adds atomic.Int64
	// cpu says whether the process is short of CPU (cpu.go).
	cpu cpuProbe
	// readyLateAt is when the most urgent lease waiting for a worker is
	// late; inflightLateAt the same for each worker's batch in flight.
	// Nanoseconds since base, never when none.
	readyLateAt    atomic.Int64
	inflightLateAt []atomic.Int64
}

func (l *load) init(workers int) {
	l.readyLateAt.Store(never)
	l.inflightLateAt = make([]atomic.Int64, workers)
	for i := range l.inflightLateAt {
		l.inflightLateAt[i].Store(never)
	}
}

// minLate is the least lateness that counts as behind: a loaded machine
// (a GC pause, a descheduled worker, the race detector) delays a renewal
// by tens of milliseconds without Redis being short of anything, and
// refusing leases for that would be a false alarm. A lease whose margin is
// too short for it (a TTL under about 1.5 seconds) never counts.
const minLate = 300 * time.Millisecond

// maxLoad is the share of the renewals a second its workers can send
// that the leases held may call for before the watchdog says it is
// behind: the rest is the headroom that a burst of renewals, a GC pause
// or a slower round trip eats without a held lease coming near its loss.
const maxLoad = 0.75

// quietShare is the most leases added while a batch was out, per lease of
// the batch, for the batch to count as not competing with acquisitions.
const quietShare = 0.1

// lateAt is when a renewal that the watchdog became able to send at from
// is late enough to say the watchdog is behind: a third of the way from
// then to e's loss, and at least minLate.
func lateAt[I any](e *Entry[I], from int64) int64 {
	return from + max((e.lossAt-from)/3, int64(minLate))
}

// checkBehind, under w.mu, publishes when the most urgent lease waiting
// for a worker is late.
func (w *Watchdog[I]) checkBehind() {
	at := int64(never)
	if len(w.ready) > 0 {
		e := w.ready[0]
		at = lateAt(e, e.readyAt)
	}
	if w.load.readyLateAt.Load() != at {
		w.load.readyLateAt.Store(at)
	}
}

// Behind reports whether the watchdog is falling behind with its
// renewals, or about to: the renewals its leases call for exceed three
// quarters of what Config.Parallel workers renew a second (a process short
// of CPU shows here before any lease is late), or a lease has waited
// unsent for a worker, or unanswered in a batch, a third of the time
// between when it was ready to go and its loss. Leases already held
// should then come first: a caller refuses new leases while it lasts,
// rather than add renewals that would push held leases past their
// deadlines. It takes no lock.
func (w *Watchdog[I]) Behind() bool { return w.BehindReason() != NotBehind }

// A Reason says which fact makes the watchdog behind (Behind).
type Reason uint8

// The reasons, in the order BehindReason looks at them.
const (
	NotBehind Reason = iota
	// DemandOverCapacity: the renewals called for exceed three quarters
	// of the capacity measured.
	DemandOverCapacity
	// WaitingForWorker: a renewal waited unsent for a worker.
	WaitingForWorker
	// WaitingForAnswer: a batch went unanswered (a slow server or link).
	WaitingForAnswer
)

// String says the reason in words, for an error or a log line.
func (r Reason) String() string {
	switch r {
	case NotBehind:
		return "not behind"
	case DemandOverCapacity:
		return "the renewals called for exceed three quarters of the capacity measured"
	case WaitingForWorker:
		return "a renewal waited for a worker"
	case WaitingForAnswer:
		return "a renewal waited for its answer"
	}
	return "unknown reason"
}

// BehindReason is Behind with the fact that holds: NotBehind when none
// does. It takes no lock and allocates nothing.
func (w *Watchdog[I]) BehindReason() Reason {
	now := w.now()
	if r := w.overload(now); r != NotBehind {
		return r
	}
	at := int64(never)
	for i := range w.load.inflightLateAt {
		at = min(at, w.load.inflightLateAt[i].Load())
	}
	if now >= at {
		return WaitingForAnswer
	}
	return NotBehind
}

// behindBesides is Behind less the wait of worker i's batch for its answer:
// whether a second attempt for that batch would add to a load the
// watchdog or its server cannot carry.
func (w *Watchdog[I]) behindBesides(i int) bool {
	now := w.now()
	if w.overloaded(now) {
		return true
	}
	for j := range w.load.inflightLateAt {
		if j != i && now >= w.load.inflightLateAt[j].Load() {
			return true
		}
	}
	return false
}

// overloaded reports whether the watchdog itself cannot send what its
// leases call for: demand over capacity, or a renewal kept waiting for a
// worker.
func (w *Watchdog[I]) overloaded(now int64) bool { return w.overload(now) != NotBehind }

// overload is overloaded's reason.
func (w *Watchdog[I]) overload(now int64) Reason {
	if c := w.capacity(); c > 0 && math.Float64frombits(w.load.demandBits.Load()) > maxLoad*c {
		return DemandOverCapacity
	}
	if now >= w.load.readyLateAt.Load() {
		return WaitingForWorker
	}
	return NotBehind
}

// capacity is how many renewals a second the watchdog counts on: a
// worker's measured rate times Config.Parallel. The workers overlap their
// round trips, but renewing is CPU work too, and what one worker measured
// alone is not what several get at once from a process short of CPU (see
// DefaultParallel). The rate is that of every batch while the process is
// short of CPU, else that of the batches without an acquisition storm
// (see the contract above); 0 while none was measured.
func (w *Watchdog[I]) capacity() float64 { return w.Load().Capacity() }

// DefaultParallel is Config.Parallel's default for a watchdog of workers
// workers: one worker per two of the process's cores (GOMAXPROCS), at
// least one and at most workers. Renewing costs the process CPU (encoding,
// decoding, the race detector's share), so workers only add capacity where
// there are cores for them and for the work the leases guard: on two
// cores, a run short of CPU that counted four workers admitted leases it
// then lost, and counting one kept them (lease's TestOverloadShortOfCPU);
// on ten, counting one refused new leases at 40,000 renewals a second
// while Redis and the client had cores to spare (bench scenario 10).
func DefaultParallel(workers int) int {
	return max(1, min(workers, runtime.GOMAXPROCS(0)/2))
}

// addDemand, under w.mu, counts e's renewals in the demand (sign 1) or
// takes them out (-1).
func (w *Watchdog[I]) addDemand(e *Entry[I], sign float64) {
	if !e.renew || e.interval <= 0 {
		return
	}
	l := &w.load
	l.demand = max(0, l.demand+sign*float64(time.Second)/float64(e.interval))
	l.demandBits.Store(math.Float64bits(l.demand))
}

// measure counts one batch of n renewals that took d in the capacity, when
// it was at least half full (a small batch says how fast the ready list
// drains, not how fast a worker renews). added is how many leases were
// added while it was out: a batch that shared its time with an acquisition
// storm updates perWorker alone. It also has the CPU probe look again.
func (w *Watchdog[I]) measure(n int, d time.Duration, added int64) {
	if 2*n < w.cfg.BatchSize || d <= 0 {
		return
	}
	w.load.cpu.sample()
	average(&w.load.perWorker, float64(n)/d.Seconds())
	if float64(added) <= quietShare*float64(n) {
		average(&w.load.quiet, w.workRate(n, d))
	}
}

// workRate is what a batch of n renewals that took d says one worker's
// share of the capacity is, with the CPU to spare (the quiet rate): the
// link's share of d (linkShare) is not work, and while it passes every
// one of Config.Workers waits at once. So it is n over d less that
// share, but never more than Workers/Parallel times n/d, what the workers
// send when each waits d for every batch.
func (w *Watchdog[I]) workRate(n int, d time.Duration) float64 {
	rate := float64(n) / d.Seconds()
	link := w.linkShare(n, d)
	if link <= 0 || link >= d {
		return rate
	}
	overlap := float64(w.cfg.Workers) / float64(w.cfg.Parallel)
	return min(float64(n)/(d-link).Seconds(), overlap*rate)
}

// linkShare learns, from a batch of n renewals that took d, how much of a
// round trip is the link's, and returns what counts now.
//
// A round trip is the link's time L, the same for any batch, and the
// server's and this process's work, in proportion to the renewals: c
// each. The answer for the fewest renewals of the last seconds (rtt.go's
// fewest), f for m renewals, and this batch give L = f − m·(d − f)/(n −
// m), when m is at most half of n (otherwise the two are too alike to
// tell L from c). The estimate is kept between such pairs, for a watchdog
// whose batches are all full has none, and never counts for more than the
// quickest answer of the last seconds (the floor): a link that became
// quicker shows there at once, and one that became slower is counted as
// work until a pair shows it, the cautious error.
func (w *Watchdog[I]) linkShare(n int, d time.Duration) time.Duration {
	now := w.now()
	floor := w.trips.floor(now)
	if floor <= 0 {
		return 0
	}
	if s := w.trips.fewest(now); s.n > 0 && s.took < d && 2*s.n <= n {
		c := float64(d-s.took) / float64(n-s.n)
		average(&w.load.link, max(0, float64(s.took)-float64(s.n)*c))
	}
	return min(time.Duration(math.Float64frombits(w.load.link.Load())), floor)
}

// average moves the moving average kept in bits a quarter of the way to
// rate (to rate itself, the first time).
func average(bits *atomic.Uint64, rate float64) {
	for {
		old := bits.Load()
		est := rate
		if c := math.Float64frombits(old); c > 0 {
			est = c + (rate-c)/4
		}
		if bits.CompareAndSwap(old, math.Float64bits(est)) {
			return
		}
	}
}

// A Load is what Behind's first fact weighs, read at one instant: what
// an error or a log line says when new leases are refused for demand over
// capacity, so that a refusal can be told from a measurement that went
// wrong.
type Load struct {
	// Demand is how many renewals a second the leases held call for.
	Demand float64
	// PerWorker is how many renewals a second one worker sends with a
	// full batch, as measured, the link's share of each round trip
	// (Link) not counted; 0 while nothing was.
	PerWorker float64
	// Workers is how many workers the capacity counts (Config.Parallel).
	Workers int
	// ShortOfCPU says the rate is that of every batch, the process being
	// short of CPU (or not judged yet); otherwise it is that of the
	// batches without an acquisition storm.
	ShortOfCPU bool
	// Link is the share of each round trip counted as the link's, not as
	// work, in the rate of the batches without a storm (0: none, and
	// always while short of CPU, when every batch's whole time counts).
	Link time.Duration
}

// Capacity is how many renewals a second the watchdog counts on:
// PerWorker times Workers.
func (l Load) Capacity() float64 { return l.PerWorker * float64(l.Workers) }

// String says the load in words, for an error or a log line.
func (l Load) String() string {
	from := "batches without an acquisition storm"
	if l.ShortOfCPU {
		from = "every batch, the process being short of CPU"
	}
	if l.PerWorker <= 0 {
		return fmt.Sprintf("%.0f renewals/s called for; capacity not measured yet", l.Demand)
	}
	if l.Link > 0 && !l.ShortOfCPU {
		from += fmt.Sprintf(", %v of each round trip the link's", l.Link.Round(time.Millisecond))
	}
	return fmt.Sprintf("%.0f renewals/s called for, capacity %.0f/s (%d workers × %.0f/s, from %s)",
		l.Demand, l.Capacity(), l.Workers, l.PerWorker, from)
}

// Load returns the watchdog's load now. It takes no lock and allocates
// nothing.
func (w *Watchdog[I]) Load() Load {
	short := w.load.cpu.short()
	bits := &w.load.quiet
	if short {
		bits = &w.load.perWorker
	}
	l := Load{
		Demand:     math.Float64frombits(w.load.demandBits.Load()),
		PerWorker:  math.Float64frombits(bits.Load()),
		Workers:    w.cfg.Parallel,
		ShortOfCPU: short,
	}
	if !short {
		l.Link = time.Duration(math.Float64frombits(w.load.link.Load()))
	}
	return l
}
