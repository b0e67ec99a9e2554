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
//     the round trips seen lately, and at the latest half way to that loss
//     time (one stuck on a dead connection is saved by the other); the
//     first answer that decides wins.
//   - A lease is lost a slack before its local deadline (Config.Slack),
//     whether or not any answer came: a timer fires late on a loaded
//     machine, and the lease's context must be cancelled by its deadline,
//     not after it. A worker never waits for an attempt past that time,
//     nor does Close, whatever the Renewer does with a context that ended.
//   - Under load (docs/design.md L1, L2), Behind and shedding act on facts:
//     a renewal that waited for a worker or for its answer, demand over a
//     measured capacity. A renewal answered before its lease's loss time
//     keeps the lease, however long the stall before it.
//
// Each file holds one part and states its contract: schedule.go (when to
// renew and when a lease is lost), attempt.go (one batch's attempts and
// hedging), rtt.go (round-trip estimates), capacity.go (Behind), shed.go
// (what is set aside under overload). The Watchdog type ties them
// together.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
// reports their loss. It is the one place that ties the parts together:
// the schedule (schedule.go) says when each lease is renewed and when it
// is lost; the attempts (attempt.go) send one batch, with a second attempt
// beside a slow first; the round trips (rtt.go) are what the attempts
// learn of the link; the load (capacity.go) says whether the watchdog is
// behind, from which a caller refuses new leases and the watchdog sheds
// what cannot be saved (shed.go).
type Watchdog[I any] struct {
	renewer Renewer[I]
	cfg     Config
	base    time.Time // monotonic origin for all times kept as int64 nanoseconds

	mu     sync.Mutex
	queue  entryHeap[I]
	ready  readyHeap[I] // due for renewal, waiting for a worker: nearest loss first
	aside  []*Entry[I]  // due, but set aside while behind (shed.go)
	armed  int64        // when the scheduler will next look, nanoseconds since base
	closed bool

	load  load       // demand, capacity and lateness (capacity.go)
	trips roundTrips // what answered attempts took (rtt.go)
	// hedging is set while a second attempt is in flight.
	hedging atomic.Bool

	kick   chan struct{} // wakes the scheduler: the earliest event moved
	work   chan struct{} // wakes a worker: ready is not empty
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the scheduler and the workers
	// sends counts the attempts in flight, and sendsUntil is the latest
	// deadline among those started (nanoseconds since base): an attempt
	// whose Renewer ignores its context's end is waited for no longer.
	sends      sync.WaitGroup
	sendsUntil atomic.Int64
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
	w.load.init(cfg.Workers)
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
	e.fullAt, e.idleAt = s, s
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
	w.load.adds.Add(1)
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
	w.load.demand = 0
	w.load.demandBits.Store(0)
	w.ready, w.aside = nil, nil
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	w.awaitSends()
	return held
}

// awaitSends waits for the attempts still running, but not past the
// latest of their deadlines: a Renewer that does not end a call when its
// context does (go-redis without ContextTimeoutEnabled waits for its
// ReadTimeout) is left to finish by itself. The goroutine that waits on
// for them ends with the last of them.
func (w *Watchdog[I]) awaitSends() {
	done := make(chan struct{})
	go func() {
		w.sends.Wait()
		close(done)
	}()
	t := time.NewTimer(max(0, time.Duration(w.sendsUntil.Load()-w.now())))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
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
