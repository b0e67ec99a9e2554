// Package watchdog keeps leases alive and decides when they are lost. It owns
// time: each lease's local deadline, the renewal schedule, batching, retry and
// loss. It knows no storage: a Renewer renews the items, whatever they are
// (tenure's Redis leases, or sessions, locks or tickets of your own).
//
// One Watchdog serves any number of leases with a fixed number of goroutines:
// a scheduler that sleeps until the earliest renewal or deadline, and a small
// pool of workers that renew due leases together, one Renew call per batch.
// Its cost grows with renewals per second, not with leases held.
//
// The rules it enforces (docs/design.md S2, S4, S7):
//
//   - A lease's local deadline is sent + ttl − drift(ttl), where sent is when
//     the request that set the TTL was sent, not when it was answered. A
//     successful renewal moves it forward by the same rule; it never moves
//     back.
//   - A renewal answered "not held" (an error wrapping ErrNotHeld) loses the
//     lease at once.
//   - A renewal that fails moves nothing, and is retried with backoff until
//     the local deadline. A renewal not yet answered is waited for until the
//     batch's loss time (a slow answer still saves the lease), with a second
//     attempt sent beside it once it has taken half an interval, or twice
//     the round trips seen lately (one stuck on a dead connection is saved
//     by the other); the first answer that decides wins.
//   - A lease is lost a slack before its local deadline (Config.Slack),
//     whether or not any answer came: a timer fires late on a loaded
//     machine, and the lease's context must be cancelled by its deadline,
//     not after it.
package watchdog

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNotHeld is what a Renewer reports, wrapped or as is, for an item it
// found no longer held: deleted, expired, or taken by someone else. The
// watchdog then loses the lease with ErrTakenOver instead of retrying.
var ErrNotHeld = errors.New("watchdog: not held")

// A Renewal asks that Item live for at least TTL from when the request is
// sent. TTL is the watchdog's copy, which Extended changes, so the renewer
// never has to keep one.
type Renewal[I any] struct {
	Item I
	TTL  time.Duration
	// Light reports that the item's last full renewal (one without Light,
	// or its acquisition) was sent at most TTL before this renewal's
	// context ends. A store that gives what an item keeps beside its own
	// key (a fencing counter) twice the TTL on every full renewal may then
	// renew the item's key alone: whenever the server runs this renewal,
	// what the full one gave still outlives what this one gives, so a
	// holder renews the rest only about once a TTL instead of once an
	// interval.
	Light bool
}

// A Renewer renews items, in as few round trips as it can: the watchdog
// hands it up to Config.BatchSize due renewals at once.
type Renewer[I any] interface {
	// Renew renews every batch[i] and sets errs[i] (len(errs) ==
	// len(batch), all nil on entry): nil when the item now lives at least
	// batch[i].TTL from the moment Renew was called, an error wrapping
	// ErrNotHeld when the item is no longer held, and any other error when
	// the outcome is unknown (a timeout, a broken connection), which the
	// watchdog retries until the lease's deadline. A renewal must never
	// shorten an item's life. Renew should return soon after ctx ends: the
	// watchdog bounds it by the batch's earliest loss time, and cancels it
	// when another attempt has answered. The watchdog may call Renew twice
	// at once with the same batch (a second attempt while the first is
	// unanswered), each with errs of its own: Renew must not modify batch.
	Renew(ctx context.Context, batch []Renewal[I], errs []error)
}

// Reasons a lease is lost, passed to the loss callback.
var (
	// ErrTakenOver: a renewal found the lease deleted or held by another
	// token. The reason a Holder gets wraps the Renewer's error when that
	// was more than a bare ErrNotHeld: test it with errors.Is.
	ErrTakenOver = errors.New("watchdog: a renewal found the lease gone or held by another token")
	// ErrExpired: the local deadline passed without a successful renewal.
	ErrExpired = errors.New("watchdog: no renewal succeeded before the local deadline")
	// ErrClosed: the watchdog is closed.
	ErrClosed = errors.New("watchdog: closed")
	// ErrUnanswered is what Holder.Renewed is told of a renewal still
	// unanswered when a second attempt becomes due (half an interval, or
	// twice the round trips seen lately): its outcome is unknown, and the
	// watchdog waits on until the lease's loss time.
	ErrUnanswered = errors.New("watchdog: renewal not answered yet")
	// ErrBehind is also matched by the reason of a lease lost at its
	// local deadline (ErrExpired) whose renewal was never sent: it waited
	// for a worker, every one busy with earlier batches, or was shed as
	// hopeless while the watchdog was behind. A loss to overload, where
	// ErrExpired alone is one to a server or network that did not answer.
	ErrBehind = errors.New("watchdog: behind with renewals: this one was never sent")
)

// errUnsent is the reason of a lease lost while its renewal waited unsent.
var errUnsent = fmt.Errorf("%w (%w)", ErrExpired, ErrBehind)

// A Holder is told what happens to one lease. The watchdog calls its
// methods from its own goroutines, outside its lock; they must not block,
// for other leases share those goroutines.
type Holder interface {
	// Lost is called at most once, with the reason, never after Remove
	// returned nil nor after Close returned.
	Lost(reason error)
	// Renewed is called after each automatic renewal attempt: err is nil
	// when the server renewed the lease, otherwise the error of an attempt
	// whose outcome is unknown and which is retried until the deadline;
	// and once more, with ErrUnanswered, while an attempt is still
	// unanswered when a second one becomes due. A renewal that finds the
	// lease not held calls Lost instead.
	Renewed(err error)
}

// LostFunc is a Holder that only wants to know of the loss.
type LostFunc func(reason error)

// Lost calls f(reason).
func (f LostFunc) Lost(reason error) { f(reason) }

// Renewed does nothing.
func (LostFunc) Renewed(error) {}

// Config tunes a Watchdog. Zero fields take their defaults.
type Config struct {
	// Drift returns the safety margin subtracted from a TTL to get a local
	// deadline. Required.
	Drift func(ttl time.Duration) time.Duration
	// BatchSize caps the renewals in one pipelined round trip (default 1000).
	BatchSize int
	// Workers is how many batches may be in flight at once (default 4).
	Workers int
	// Parallel is how many workers' worth of renewals a second the process
	// is counted to sustain when Behind weighs the renewals its leases call
	// for (default DefaultParallel(Workers)).
	Parallel int
	// RetryMin is the first delay before retrying a failed renewal; it
	// doubles on each failure up to a quarter of the lease's renewal
	// interval (default 10ms).
	RetryMin time.Duration
	// Slack returns how long before a lease's local deadline the watchdog
	// loses it (default DefaultSlack). A timer fires, and the goroutine
	// that cancels runs, some time after it was due, more so on a loaded
	// machine: losing the lease that much earlier makes the cancellation
	// land before the deadline rather than after it. Slack must be below
	// the lease's TTL minus its drift.
	Slack func(ttl time.Duration) time.Duration
}

// DefaultSlack is a twentieth of the TTL, at most 50ms: scheduling delays
// seen under the race detector on two loaded cores reach tens of
// milliseconds, and a short TTL cannot spare more than a small part of its
// life.
func DefaultSlack(ttl time.Duration) time.Duration {
	return min(ttl/20, 50*time.Millisecond)
}

// Watchdog renews registered leases, items of type I, through a Renewer and
// reports their loss.
type Watchdog[I any] struct {
	renewer Renewer[I]
	cfg     Config
	base    time.Time // monotonic origin for all times kept as int64 nanoseconds

	mu     sync.Mutex
	queue  entryHeap[I]
	ready  readyHeap[I] // due for renewal, waiting for a worker: nearest loss first
	armed  int64        // when the scheduler will next look, nanoseconds since base
	closed bool

	// behindAt is when the most urgent lease waiting for a worker is late
	// (lateAt, Behind); never when none waits. inflightBehindAt is the
	// same for each worker's batch in flight. Nanoseconds since base.
	behindAt         atomic.Int64
	inflightBehindAt []atomic.Int64

	// demand is how many renewals a second the leases held call for, the
	// sum of 1/interval over those renewed (guarded by mu, published in
	// demandBits for Behind); perWorker is how many a second one worker
	// renews when it has a full batch to send, a moving average of those
	// batches (0 until one was sent). Both are float64 bits.
	demand     float64
	demandBits atomic.Uint64
	perWorker  atomic.Uint64
	// hedging is set while a second attempt is in flight.
	hedging atomic.Bool

	// rtt is how long renewal round trips take, nanoseconds: the longest
	// of those answered lately, decaying slowly (observeRTT), raised to
	// the wait of one that was not. A second attempt waits at least twice
	// that (see take).
	rtt atomic.Int64

	kick   chan struct{} // wakes the scheduler: the earliest event moved
	work   chan struct{} // wakes a worker: ready is not empty
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type state uint8

const (
	idle     state = iota // waiting for its next renewal
	waiting               // due, waiting for a worker (in w.ready), or shed
	inflight              // in a batch being renewed
	done                  // lost or removed
)

const never = math.MaxInt64

// Entry is one lease under the watchdog. Its fields belong to the Watchdog
// and are guarded by its mutex.
type Entry[I any] struct {
	item     I
	ttl      time.Duration // what a renewal sets
	interval time.Duration
	renew    bool
	holder   Holder
	w        *Watchdog[I]

	deadline int64 // local deadline, nanoseconds since w.base
	fullAt   int64 // when the last full renewal (or the acquisition) was sent
	lossAt   int64 // when the scheduler loses it: deadline minus the slack
	next     int64 // next renewal attempt, nanoseconds since w.base; never when not renewing
	attempt  uint8 // failed renewals in a row
	state    state
	index    int // in w.queue; -1 when not queued
	reason   error
}

// New starts a Watchdog whose renewals r sends. Close stops it.
func New[I any](r Renewer[I], cfg Config) *Watchdog[I] {
	if cfg.Drift == nil {
		panic("watchdog: Config.Drift is required")
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel(cfg.Workers)
	}
	cfg.Parallel = min(cfg.Parallel, cfg.Workers)
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 10 * time.Millisecond
	}
	if cfg.Slack == nil {
		cfg.Slack = DefaultSlack
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watchdog[I]{
		renewer: r,
		cfg:     cfg,
		base:    time.Now(),
		kick:    make(chan struct{}, 1),
		work:    make(chan struct{}, cfg.Workers),
		ctx:     ctx,
		cancel:  cancel,
	}
	w.behindAt.Store(never)
	w.inflightBehindAt = make([]atomic.Int64, cfg.Workers)
	for i := range w.inflightBehindAt {
		w.inflightBehindAt[i].Store(never)
	}
	w.wg.Add(1 + cfg.Workers)
	go w.schedule()
	for i := range cfg.Workers {
		go w.worker(i)
	}
	return w
}

func (w *Watchdog[I]) at(t time.Time) int64 { return int64(t.Sub(w.base)) }

func (w *Watchdog[I]) now() int64 { return w.at(time.Now()) }

func (w *Watchdog[I]) time(ns int64) time.Time { return w.base.Add(time.Duration(ns)) }

// Add puts a lease on item under the watchdog. sent is when the request that
// gave it ttl was sent; renewals ask for ttl every interval. With renew false
// the lease is not renewed, but is still lost by its local deadline. The
// watchdog tells holder of renewals and of the loss.
//
// The caller must not pass a lease whose reply came after its deadline;
// such a lease is lost at once.
func (w *Watchdog[I]) Add(item I, ttl time.Duration, sent time.Time, interval time.Duration, renew bool, holder Holder) (*Entry[I], error) {
	e := &Entry[I]{item: item, ttl: ttl, interval: interval, renew: renew, holder: holder, w: w, index: -1}
	s := w.at(sent)
	e.deadline, e.lossAt = math.MinInt64, math.MinInt64
	w.moveDeadline(e, s, ttl)
	e.fullAt = s
	e.next = never
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	if renew {
		e.next = s + int64(interval)
		if len(w.queue) >= spreadFrom {
			// Past a batch of leases, the first renewal falls somewhere
			// in the second half of the interval, so that leases taken
			// in one burst do not fall due in one burst every interval
			// after (sweep keeps them apart); fewer share a round trip.
			e.next -= rand.Int64N(int64(interval)/2 + 1)
		}
	}
	w.push(e)
	w.addDemand(e, 1)
	return e, nil
}

// Item returns the item Add was given.
func (e *Entry[I]) Item() I { return e.item }

// Deadline returns the lease's local deadline: its context must be
// cancelled no later than this.
func (e *Entry[I]) Deadline() time.Time {
	w := e.w
	w.mu.Lock()
	d := e.deadline
	w.mu.Unlock()
	return w.time(d)
}

// Interval returns the lease's renewal interval.
func (e *Entry[I]) Interval() time.Duration {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	return e.interval
}

// TTL returns the TTL the lease's renewals set.
func (e *Entry[I]) TTL() time.Duration {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	return e.ttl
}

// Remove takes the lease from the watchdog: no renewal is sent and Lost is
// not called after it returns. It returns nil if the lease was still held,
// else the reason it was lost (or ErrClosed).
func (w *Watchdog[I]) Remove(e *Entry[I]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.state == done {
		return e.reason
	}
	w.finish(e, nil)
	return nil
}

// Extended records a successful explicit renewal sent at sent with ttl: the
// deadline moves forward by the usual rule and later renewals use ttl and
// interval. It returns the loss reason when the lease is no longer watched.
func (w *Watchdog[I]) Extended(e *Entry[I], sent time.Time, ttl, interval time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.state == done {
		return e.reason
	}
	w.addDemand(e, -1)
	e.ttl = ttl
	e.interval = interval
	w.addDemand(e, 1)
	s := w.at(sent)
	w.moveDeadline(e, s, ttl)
	if e.state == idle && e.renew {
		e.next = s + int64(interval)
		e.attempt = 0
	}
	w.requeue(e)
	return nil
}

// Close stops every goroutine of the watchdog and returns the items of the
// leases it still held, which it no longer watches: the caller releases
// them.
func (w *Watchdog[I]) Close() []I {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	var held []I
	for _, e := range w.queue {
		held = append(held, e.item)
		e.state, e.reason, e.index = done, ErrClosed, -1
	}
	w.queue = nil
	w.demand = 0
	w.demandBits.Store(0)
	w.ready = nil
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	return held
}

// moveDeadline moves e's local deadline (and the moment it is lost) to
// what a request sent at sent that set ttl gives, if that is later: a
// deadline never moves back.
func (w *Watchdog[I]) moveDeadline(e *Entry[I], sent int64, ttl time.Duration) {
	if d := sent + int64(ttl-w.cfg.Drift(ttl)); d > e.deadline {
		e.deadline = d
		e.lossAt = d - int64(w.cfg.Slack(ttl))
	}
}

// key is when the scheduler must next look at e.
func (e *Entry[I]) key() int64 {
	if e.state == idle && e.next < e.lossAt {
		return e.next
	}
	return e.lossAt
}

func (w *Watchdog[I]) push(e *Entry[I]) {
	heap.Push(&w.queue, e)
	w.wakeFor(e)
}

// requeue restores e's place in the queue after its key changed.
func (w *Watchdog[I]) requeue(e *Entry[I]) {
	if e.index < 0 {
		return
	}
	heap.Fix(&w.queue, e.index)
	w.wakeFor(e)
}

// wakeFor wakes the scheduler if e needs it before it would look anyway.
// A lease taken and released within an interval thus costs the scheduler
// nothing: its timer, armed for an earlier lease, fires late enough.
func (w *Watchdog[I]) wakeFor(e *Entry[I]) {
	if e.index == 0 && e.key() < w.armed {
		w.armed = e.key()
		w.wake()
	}
}

// finish marks e done with reason (nil: removed) and drops it from the queue.
func (w *Watchdog[I]) finish(e *Entry[I], reason error) {
	e.state, e.reason = done, reason
	w.addDemand(e, -1)
	if e.index >= 0 {
		heap.Remove(&w.queue, e.index)
	}
}

// takenOver is the reason of a loss to a renewal answered "not held":
// ErrTakenOver, and the renewer's error when it says more (errors.Is finds
// both, and Error prints both).
func takenOver(err error) error {
	if err == ErrNotHeld {
		return ErrTakenOver
	}
	return &lossError{err: err}
}

type lossError struct{ err error }

func (e *lossError) Error() string        { return ErrTakenOver.Error() + ": " + e.err.Error() }
func (e *lossError) Is(target error) bool { return target == ErrTakenOver }
func (e *lossError) Unwrap() error        { return e.err }

func (w *Watchdog[I]) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// signal wakes up to n idle workers; busy ones find the work when they
// look again.
func (w *Watchdog[I]) signal(n int) {
	for range n {
		select {
		case w.work <- struct{}{}:
		default:
		}
	}
}

// schedule is the scheduler goroutine: it loses leases at their deadlines
// and hands due renewals to the workers.
func (w *Watchdog[I]) schedule() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lost []*Entry[I]
	for {
		w.mu.Lock()
		now := w.now()
		lost = w.sweep(now, lost[:0])
		wait := time.Hour
		if len(w.queue) > 0 {
			wait = time.Duration(w.queue[0].key() - now)
		}
		w.armed = now + int64(wait)
		batches := (len(w.ready) + w.cfg.BatchSize - 1) / w.cfg.BatchSize
		w.mu.Unlock()

		for _, e := range lost {
			e.holder.Lost(e.reason) // set by sweep
		}
		w.signal(min(batches, w.cfg.Workers))
		if !w.sleep(timer, wait) {
			return
		}
	}
}

// sweep, under w.mu, loses the entries whose loss time has come (appending
// them to lost) and moves the due ones to the ready list.
func (w *Watchdog[I]) sweep(now int64, lost []*Entry[I]) []*Entry[I] {
	due := false
	for len(w.queue) > 0 {
		e := w.queue[0]
		if e.lossAt <= now {
			reason := ErrExpired
			if e.state == waiting {
				reason = errUnsent
			}
			w.finish(e, reason)
			lost = append(lost, e)
			continue
		}
		// Renew what is due, and with it whatever falls due within a
		// fifth of its interval while the batch has room, so that a few
		// leases taken around the same time share round trips from then
		// on, but many stay spread over their interval.
		early := e.next > now
		if e.state != idle || e.next == never || e.next-now > int64(e.interval/5) || early && (!due || len(w.ready) >= w.cfg.BatchSize) {
			break
		}
		due = true
		heap.Pop(&w.queue)
		e.state = waiting
		heap.Push(&w.ready, e)
		heap.Push(&w.queue, e) // keyed by its deadline while in flight
	}
	w.checkBehind()
	return lost
}

// checkBehind, under w.mu, sets behindAt from the most urgent lease
// waiting for a worker.
func (w *Watchdog[I]) checkBehind() {
	at := int64(never)
	if len(w.ready) > 0 {
		at = w.lateAt(w.ready[0])
	}
	if w.behindAt.Load() != at {
		w.behindAt.Store(at)
	}
}

// lateAt is when e's renewal is late enough to say the watchdog is
// behind: a third of the way from when it fell due (its last successful
// renewal's send time plus the interval: retries do not move it) to when
// it is lost (two thirds of an interval late with the default interval of
// a third of the TTL), and at least minLate.
func (w *Watchdog[I]) lateAt(e *Entry[I]) int64 {
	due := e.deadline - int64(e.ttl-w.cfg.Drift(e.ttl)) + int64(e.interval)
	return due + max((e.lossAt-due)/3, int64(minLate))
}

// minLate is the least lateness that counts as behind: a loaded machine
// (a GC pause, a descheduled worker, the race detector) delays a renewal
// by tens of milliseconds without Redis being short of anything, and
// refusing leases for that would be a false alarm. A lease whose margin is
// too short for it (a TTL under about 1.5 seconds) never counts.
const minLate = 300 * time.Millisecond

// Behind reports whether the watchdog is falling behind with its
// renewals, or about to. Either its workers have spent three quarters of
// their time on full batches over the last seconds (the renewals due
// against the capacity that the process, its CPU and its link, has now:
// a process short of CPU shows here before any lease is late), or a lease
// due for renewal has gone unrenewed for a third of the time between when
// it fell due and when it is lost, waiting for a worker or in a batch
// whose reply has not come. Leases already held should then come first: a
// caller refuses new leases while it lasts, rather than add renewals that
// would push held leases past their deadlines. It takes no lock.
func (w *Watchdog[I]) Behind() bool {
	now := w.now()
	// The capacity counted is Config.Parallel workers': the workers
	// overlap their round trips, but renewing is CPU work too, and what
	// one worker measured alone is not what several get at once from a
	// process short of CPU (see DefaultParallel).
	if c := math.Float64frombits(w.perWorker.Load()); c > 0 &&
		math.Float64frombits(w.demandBits.Load()) > maxLoad*c*float64(w.cfg.Parallel) {
		return true
	}
	at := w.behindAt.Load()
	for i := range w.inflightBehindAt {
		at = min(at, w.inflightBehindAt[i].Load())
	}
	return at != never && now >= at
}

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

// spreadFrom is how many leases a watchdog holds before it spreads new
// leases' first renewals: fewer fit a batch or two, and share round trips.
const spreadFrom = 1000

// maxLoad is the share of the renewals a second its workers can send
// that the leases held may call for before the watchdog says it is
// behind: the rest is the headroom that a burst of renewals, a GC pause
// or a slower round trip eats without a held lease coming near its loss.
const maxLoad = 0.75

// addDemand, under w.mu, counts e's renewals in the demand (sign 1) or
// takes them out (-1).
func (w *Watchdog[I]) addDemand(e *Entry[I], sign float64) {
	if !e.renew || e.interval <= 0 {
		return
	}
	w.demand = max(0, w.demand+sign*float64(time.Second)/float64(e.interval))
	w.demandBits.Store(math.Float64bits(w.demand))
}

// measure counts one batch of n renewals that took d in the capacity,
// when it was at least half full: a small batch says how fast the ready
// list drains, not how fast a worker renews.
func (w *Watchdog[I]) measure(n int, d time.Duration) {
	if 2*n < w.cfg.BatchSize || d <= 0 {
		return
	}
	rate := float64(n) / d.Seconds()
	for {
		old := w.perWorker.Load()
		est := rate
		if c := math.Float64frombits(old); c > 0 {
			est = c + (rate-c)/4
		}
		if w.perWorker.CompareAndSwap(old, math.Float64bits(est)) {
			return
		}
	}
}

// sleep waits for wait to pass or a kick; it reports false when the
// watchdog is closing.
func (w *Watchdog[I]) sleep(timer *time.Timer, wait time.Duration) bool {
	timer.Reset(wait)
	select {
	case <-timer.C:
	case <-w.kick:
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	case <-w.ctx.Done():
		return false
	}
	return true
}

// batch is one worker's renewal round trip; its slices are reused from
// one batch to the next.
type batch[I any] struct {
	entries []*Entry[I]
	reqs    []Renewal[I] // what was sent: the TTLs a success counts for
	errs    []error
	lost    []*Entry[I]
	limit   int64 // when to give up on the reply, nanoseconds since base
	// hedgeAt is when a second attempt goes out beside the first if
	// that has not answered, nanoseconds since base; never for none.
	hedgeAt int64
	// sent is, for each entry, when the request whose answer settles it
	// was sent, nanoseconds since base.
	sent []int64
	// The first attempt's answers.
	errs1 []error
	// leftRunning reports that an attempt still runs, reading reqs and
	// writing errs1: the next batch must not reuse them.
	leftRunning bool
	// behindAt is when its most urgent lease is late (lateAt),
	// nanoseconds since base.
	behindAt int64
}

// worker renews batches from w.ready until it is empty, then sleeps. Its
// batch in flight has its share of Behind under index i.
func (w *Watchdog[I]) worker(i int) {
	defer w.wg.Done()
	behindAt := &w.inflightBehindAt[i]
	var b batch[I]
	for {
		select {
		case <-w.work:
		case <-w.ctx.Done():
			return
		}
		for w.take(&b) {
			if len(b.entries) > 0 {
				behindAt.Store(b.behindAt)
				start := time.Now()
				w.renew(&b)
				if decided(b.errs) {
					w.measure(len(b.entries), time.Since(start))
				}
				behindAt.Store(never)
			}
		}
	}
}

// take moves up to a batch of ready entries into b, and reports false
// when there were none.
func (w *Watchdog[I]) take(b *batch[I]) bool {
	w.mu.Lock()
	n := min(len(w.ready), w.cfg.BatchSize)
	b.entries, b.reqs = b.entries[:0], b.reqs[:0]
	// A renewal is given until the earliest loss time of its batch: an
	// answer that comes any sooner still saves every lease in it. Giving
	// up earlier buys nothing on a link that is slow rather than gone,
	// and costs much: go-redis drops a connection whose command timed
	// out, and the retry pays a dial, HELLO and a cold script again,
	// which on a slow link takes longer than the first attempt would
	// have (every lease was lost so at a 600ms round trip and a 1s
	// interval). A connection that died silently is the case a retry
	// saves: for it a second attempt goes out beside the first, on
	// another connection, once the first has taken half an interval or
	// twice the round trips seen lately, whichever is longer; the first
	// answer wins (see renew). When more are ready than a batch holds,
	// the nearest losses go first.
	//
	// A lease whose loss is nearer than the round trips seen lately is
	// hopeless: it goes in a batch of its own kind, so that its near loss
	// time does not cut short the wait for the others (the nearest losses
	// come first, so they lead). While the watchdog is behind it is not
	// sent at all: it is lost at its loss time, and its renewal's share of
	// the capacity goes to leases that can still be saved.
	now := w.now()
	rtt := w.rtt.Load()
	patience := 2 * rtt
	shed := w.Behind()
	b.limit, b.hedgeAt, b.behindAt = never, never, never
	for range n {
		e := heap.Pop(&w.ready).(*Entry[I])
		if e.state != waiting {
			continue // released or lost while it waited for a worker
		}
		if hopeless := e.lossAt-now < rtt; e.lossAt <= now || hopeless && shed {
			continue // lost, unsent, by the scheduler's next sweep
		} else if !hopeless && len(b.entries) > 0 && b.entries[0].lossAt-now < rtt {
			heap.Push(&w.ready, e) // for the next batch
			break
		}
		e.state = inflight
		b.entries = append(b.entries, e)
		b.reqs = append(b.reqs, Renewal[I]{Item: e.item, TTL: e.ttl})
		b.limit = min(b.limit, e.lossAt)
		b.hedgeAt = min(b.hedgeAt, now+max(int64(e.interval/2), patience))
		b.behindAt = min(b.behindAt, w.lateAt(e))
	}
	for i, e := range b.entries {
		b.reqs[i].Light = b.limit-e.fullAt <= int64(e.ttl)
	}
	w.checkBehind()
	more := len(w.ready) > 0
	w.mu.Unlock()
	if more {
		w.signal(1)
	}
	return n > 0
}

// renew sends b, applies the results and tells the holders.
func (w *Watchdog[I]) renew(b *batch[I]) {
	n := len(b.entries)
	b.errs = resize(b.errs, n)
	b.sent = resize(b.sent, n)
	ctx, cancel := context.WithDeadline(w.ctx, w.time(b.limit))
	w.attempt(ctx, b)
	cancel()
	b.lost = w.settle(b)
	for _, e := range b.lost {
		e.holder.Lost(e.reason) // set by settle, in this goroutine
	}
	// Everyone in the batch hears how its renewal went, after the
	// losses: those are what must not wait.
	for i, e := range b.entries {
		if !errors.Is(b.errs[i], ErrNotHeld) {
			e.holder.Renewed(b.errs[i])
		}
	}
	if b.leftRunning {
		b.reqs, b.errs1 = nil, nil
	}
}

// resize returns s with length n, cleared, reusing its array.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		s = make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// attempt sends b's renewals, and a second attempt beside the first if
// that has not answered by b.hedgeAt, and returns once one of them has
// answered for every lease, or both have returned. It leaves in b.errs and
// b.sent, for each lease, the answer that settles it and when its request
// was sent. Each attempt runs in a goroutine of its own: go-redis does not
// return on a cancelled context, only at its deadline (the batch's loss
// time), so an attempt stuck on a dead connection is left to end by
// itself, with the slices it reads, while the worker goes on.
func (w *Watchdog[I]) attempt(ctx context.Context, b *batch[I]) {
	b.leftRunning = false
	done := make(chan answer, 2)
	b.errs1 = resize(b.errs1, len(b.entries))
	w.wg.Add(1)
	go w.send(ctx, b.reqs, b.errs1, done)
	running, answered := 1, 0
	var hedge <-chan time.Time
	if b.hedgeAt < b.limit {
		t := time.NewTimer(time.Duration(b.hedgeAt - w.now()))
		defer t.Stop()
		hedge = t.C
	}
	for running > 0 {
		select {
		case <-hedge:
			hedge = nil
			// The holders hear that the renewal is slow, as they heard
			// of one given up when renewals were given up at this point:
			// a lease cut off from its server shows failing renewals
			// before it is lost.
			for _, e := range b.entries {
				e.holder.Renewed(ErrUnanswered)
			}
			// One second attempt at a time, and none while behind: a
			// first attempt slow for want of CPU, or a server short of
			// it, is not helped by sending it twice. A dead connection
			// holds up every batch sent on it: one at a time still
			// finds a live one.
			if w.Behind() || !w.hedging.CompareAndSwap(false, true) {
				continue
			}
			running++
			w.wg.Add(1)
			reqs := b.reqs // renew drops b.reqs while this attempt may run on
			go func() {
				defer w.hedging.Store(false)
				w.send(ctx, reqs, make([]error, len(reqs)), done)
			}()
			continue
		case a := <-done:
			running--
			b.merge(a, answered == 0)
			answered++
		}
		if decided(b.errs) || running == 0 && hedge == nil {
			break
		}
		if running == 0 {
			return // the first failed before a second was due: retry later
		}
	}
	b.leftRunning = running > 0
}

// An answer is one attempt's: its errors, and when it was sent.
type answer struct {
	errs []error
	sent int64
}

// send is one attempt, in a goroutine of its own.
func (w *Watchdog[I]) send(ctx context.Context, reqs []Renewal[I], errs []error, done chan<- answer) {
	defer w.wg.Done()
	sent := w.now()
	w.renewer.Renew(ctx, reqs, errs)
	// An attempt that failed without an answer for every renewal (a node
	// that refused the connection, go-redis dialing it again meanwhile,
	// while the other nodes of a Cluster answered at once) says nothing of
	// the round trip: counting it made every lease of a killed Cluster
	// primary hopeless, unsent and lost, although its replica was promoted
	// seconds before their deadline (lease's
	// TestClusterKilledPrimaryKeepsLeases).
	if gaveUp := ctx.Err() != nil; gaveUp || decided(errs) {
		w.observeRTT(time.Duration(w.now()-sent), gaveUp)
	}
	done <- answer{errs: errs, sent: sent}
}

// merge takes an attempt's answer into b.errs and b.sent: all of it when it
// is the first, else each renewal it decided that the earlier did not, or
// found not held.
func (b *batch[I]) merge(a answer, first bool) {
	for i, err := range a.errs {
		if first || !errors.Is(b.errs[i], ErrNotHeld) && (err == nil || errors.Is(err, ErrNotHeld)) {
			b.errs[i], b.sent[i] = err, a.sent
		}
	}
}

// decided reports whether every renewal's outcome is known: renewed, or
// not held.
func decided(errs []error) bool {
	for _, err := range errs {
		if err != nil && !errors.Is(err, ErrNotHeld) {
			return false
		}
	}
	return true
}

// observeRTT updates the round-trip estimate with one attempt's: took,
// or at least took when the attempt was given up. The estimate rises at
// once and falls slowly, as a timeout's should: a link that just slowed
// down must not see its next renewals hedged for round trips it already
// showed it takes.
func (w *Watchdog[I]) observeRTT(took time.Duration, gaveUp bool) {
	d := int64(took)
	for {
		old := w.rtt.Load()
		est := old + (d-old)/8
		if d > old {
			est = d
		}
		if gaveUp {
			est = max(old, d)
		}
		if w.rtt.CompareAndSwap(old, est) {
			return
		}
	}
}

// settle applies a batch's results and returns the leases found lost. A
// success counts for the TTL that was sent (b.reqs[i].TTL), not the lease's
// current one, which an Extend may have changed meanwhile.
func (w *Watchdog[I]) settle(b *batch[I]) []*Entry[I] {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	lost := b.lost[:0]
	for i, e := range b.entries {
		if e.state != inflight {
			continue // removed, lost at its deadline, or closed meanwhile
		}
		switch err := b.errs[i]; {
		case err == nil:
			sent := b.sent[i]
			w.moveDeadline(e, sent, b.reqs[i].TTL)
			if !b.reqs[i].Light {
				e.fullAt = sent
			}
			e.next = sent + int64(e.interval)
			e.attempt = 0
		case errors.Is(err, ErrNotHeld):
			w.finish(e, takenOver(err))
			lost = append(lost, e)
			continue
		default:
			e.next = now + int64(w.retryDelay(e))
			e.attempt = min(e.attempt+1, 30)
		}
		e.state = idle
		w.requeue(e)
	}
	return lost
}

// retryDelay is the pause before the next attempt after e.attempt+1 failed
// renewals in a row: exponential from RetryMin up to a quarter of the
// interval, with jitter so that many leases do not retry in lockstep.
// It is not cenkalti/backoff, which package lease uses for waits: a
// backoff.ExponentialBackOff keeps its state in an object, and the
// watchdog would need one per lease (a million leases, a million objects),
// where this is a pure function of the one-byte attempt count each entry
// already keeps.
func (w *Watchdog[I]) retryDelay(e *Entry[I]) time.Duration {
	d := w.cfg.RetryMin << min(e.attempt, 20)
	if c := e.interval / 4; d > c {
		d = max(c, time.Millisecond)
	}
	return d/2 + rand.N(d/2+1)
}

// readyHeap orders the entries waiting for a worker by when they would be
// lost, earliest first. It keeps no index: an entry leaves it only by Pop
// (one removed meanwhile is skipped then).
type readyHeap[I any] []*Entry[I]

func (h readyHeap[I]) Len() int           { return len(h) }
func (h readyHeap[I]) Less(i, j int) bool { return h[i].lossAt < h[j].lossAt }
func (h readyHeap[I]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap[I]) Push(x any)        { *h = append(*h, x.(*Entry[I])) }
func (h *readyHeap[I]) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}

// entryHeap orders entries by key, earliest first.
type entryHeap[I any] []*Entry[I]

func (h entryHeap[I]) Len() int           { return len(h) }
func (h entryHeap[I]) Less(i, j int) bool { return h[i].key() < h[j].key() }
func (h entryHeap[I]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *entryHeap[I]) Push(x any) {
	e := x.(*Entry[I])
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap[I]) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*h = old[:n-1]
	return e
}
