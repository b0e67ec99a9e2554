package watchdog

// The schedule: when each lease is renewed and when it is lost.
//
// Its contract, from three facts only (when a request was sent, what its
// answer was, and the monotonic clock):
//
//   - A lease's local deadline is sent + ttl − drift(ttl) for the request
//     that set its TTL; an answered renewal moves it forward by that rule,
//     and it never moves back. The lease is lost a slack before it
//     (lossAt), whatever is in flight: ErrExpired, with ErrBehind when its
//     renewal was waiting unsent.
//   - It is renewed every interval from the send time of its last
//     successful renewal, and at once when that time has passed; a failed
//     attempt is retried after retryDelay. A renewal due within a fifth of
//     its interval goes with others due now while a batch has room.
//   - Due leases go to the ready list, nearest loss first, for the workers
//     (attempt.go), which may set one aside while the watchdog is behind
//     (shed.go); each sweep puts back what can be sent again.

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"
)

type state uint8

const (
	idle     state = iota // waiting for its next renewal
	waiting               // due: waiting for a worker (in w.ready), or set aside (w.aside)
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
	idleAt   int64 // when it last became idle: added, or its attempt settled
	readyAt  int64 // when its renewal could first be sent: max(due, idleAt)
	state    state
	index    int // in w.queue; -1 when not queued
	reason   error
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
		w.pushReady(e, max(w.dueAt(e), e.idleAt))
		heap.Push(&w.queue, e) // keyed by its deadline while in flight
	}
	w.readmit(now)
	w.checkBehind()
	return lost
}

// dueAt is when e's renewal falls due: an interval after the request that
// last set its deadline was sent. A renewal sent earlier (the first ones
// spread over their interval, or joining a batch due now) is not late
// before then.
func (w *Watchdog[I]) dueAt(e *Entry[I]) int64 {
	return e.deadline - int64(e.ttl-w.cfg.Drift(e.ttl)) + int64(e.interval)
}

// pushReady, under w.mu, puts e on the ready list, its renewal ready to
// be sent since at: the time it fell due, or, if its previous attempt was
// answered after that, the answer. A renewal delayed by a server's stall
// is thus not late for the watchdog, but one delayed by the watchdog's
// own scheduler (a process short of CPU) is.
func (w *Watchdog[I]) pushReady(e *Entry[I], at int64) {
	e.readyAt = at
	heap.Push(&w.ready, e)
}

// spreadFrom is how many leases a watchdog holds before it spreads new
// leases' first renewals: fewer fit a batch or two, and share round trips.
const spreadFrom = 1000

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
