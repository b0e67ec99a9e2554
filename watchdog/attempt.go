package watchdog

import (
	"container/heap"
	"context"
	"errors"
	"time"
)

// The attempts: one worker's batch, from the ready list to its settled
// outcomes.
//
// Its contract:
//
//   - A batch's request is given until the earliest loss time among its
//     leases (limit): any answer before then still saves them. A lease
//     whose loss is nearer than the longest round trip seen lately goes in
//     a batch of its own kind, so that its near limit does not cut short
//     the wait for the others.
//   - A second attempt goes out beside the first, on another connection,
//     once the first has waited half an interval or twice the round trips
//     seen lately (rtt.go), and at the latest half way to the batch's
//     loss; one at a time, and none while the watchdog is overloaded or
//     another batch waits for its answer (its own wait does not count);
//     the first answer that decides a lease wins, and "not held" from
//     either loses it.
//   - The worker never waits past limit, whatever the Renewer does with a
//     context that ended: an attempt still running then is left to end by
//     itself, its outcome unknown, and Close does not wait for it either.
//   - Outcomes move deadlines by the TTL that was sent, from the send time
//     of the attempt that answered (settle).

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
	// lateAt is when its most urgent lease is late (capacity.go's
	// lateAt, from when the batch was taken), nanoseconds since base.
	lateAt int64
	// worker is the index of the worker that sends it.
	worker int
}

// worker renews batches from w.ready until it is empty, then sleeps. Its
// batch in flight has its share of Behind under index i.
func (w *Watchdog[I]) worker(i int) {
	defer w.wg.Done()
	lateAt := &w.load.inflightLateAt[i]
	b := batch[I]{worker: i}
	for {
		select {
		case <-w.work:
		case <-w.ctx.Done():
			return
		}
		for w.take(&b) {
			if len(b.entries) == 0 {
				continue
			}
			lateAt.Store(b.lateAt)
			start, adds := time.Now(), w.load.adds.Load()
			w.renew(&b)
			if decided(b.errs) {
				w.measure(len(b.entries), time.Since(start), w.load.adds.Load()-adds)
			}
			lateAt.Store(never)
		}
	}
}

// take moves up to a batch of ready entries into b, and reports false
// when there were none. When more are ready than a batch holds, the
// nearest losses go first.
func (w *Watchdog[I]) take(b *batch[I]) bool {
	w.mu.Lock()
	now := w.now()
	w.readmit(now)
	n := min(len(w.ready), w.cfg.BatchSize)
	b.entries, b.reqs = b.entries[:0], b.reqs[:0]
	cutoff := int64(w.trips.cutoff())
	wait := 2 * cutoff // a second attempt waits twice the round trips seen lately
	shed := w.overloaded(now)
	b.limit, b.hedgeAt, b.lateAt = never, never, never
	for range n {
		e := heap.Pop(&w.ready).(*Entry[I])
		switch near := e.lossAt-now < cutoff; {
		case e.state != waiting || e.lossAt <= now:
			continue // released or lost meanwhile, or lost by the next sweep
		case w.hopeless(e, now, shed):
			w.aside = append(w.aside, e)
			continue
		case !near && len(b.entries) > 0 && b.entries[0].lossAt-now < cutoff:
			heap.Push(&w.ready, e) // for the next batch
		default:
			w.enlist(b, e, now, wait)
			continue
		}
		break
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

// enlist, under w.mu, puts e in b, taken at now, with wait the least a
// second attempt waits for the first.
func (w *Watchdog[I]) enlist(b *batch[I], e *Entry[I], now, wait int64) {
	e.state = inflight
	b.entries = append(b.entries, e)
	b.reqs = append(b.reqs, Renewal[I]{Item: e.item, TTL: e.ttl})
	b.limit = min(b.limit, e.lossAt)
	// However long the round trips seen lately (an attempt given up at
	// its limit counts its whole wait), the second attempt goes out half
	// way to the loss at the latest: it then has as long to be answered
	// as the first was given alone.
	b.hedgeAt = min(b.hedgeAt, now+min(max(int64(e.interval/2), wait), (e.lossAt-now)/2))
	b.lateAt = min(b.lateAt, lateAt(e, max(now, w.dueAt(e))))
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
// answered for every lease, both have returned, or ctx ended. It leaves in
// b.errs and b.sent, for each lease, the answer that settles it and when
// its request was sent. Each attempt runs in a goroutine of its own, so
// that one stuck on a dead connection, or in a client that does not end a
// command when its context does (go-redis without ContextTimeoutEnabled),
// is left to end by itself, with the slices it reads, while the worker
// goes on.
func (w *Watchdog[I]) attempt(ctx context.Context, b *batch[I]) {
	b.leftRunning = false
	done := make(chan answer, 2)
	b.errs1 = resize(b.errs1, len(b.entries))
	w.start(ctx, b.reqs, b.errs1, done)
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
			if w.hedge(ctx, b, done) {
				running++
			}
			continue
		case a := <-done:
			running--
			b.merge(a, answered == 0)
			answered++
		case <-ctx.Done():
			// The limit passed (or the watchdog closed) with an attempt
			// unanswered: what it would say is unknown.
			if answered == 0 {
				for i := range b.errs {
					b.errs[i] = ctx.Err()
				}
			}
			b.leftRunning = true
			return
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

// hedge is called when b's first attempt has not answered by b.hedgeAt:
// it tells the holders, and starts a second attempt unless the watchdog is
// behind or one is already out. It reports whether it started one.
func (w *Watchdog[I]) hedge(ctx context.Context, b *batch[I], done chan<- answer) bool {
	// The holders hear that the renewal is slow: a lease cut off from its
	// server shows failing renewals before it is lost.
	for _, e := range b.entries {
		e.holder.Renewed(ErrUnanswered)
	}
	// One second attempt at a time, and none while behind: a first
	// attempt slow for want of CPU, or a server short of it, is not
	// helped by sending it twice. A dead connection holds up every batch
	// sent on it: one at a time still finds a live one. This batch's own
	// wait does not count: it raises WaitingForAnswer a third of the way
	// to its loss, before a second attempt is due at a long interval, and
	// a silent connection then lost the lease with no second attempt.
	if w.behindBesides(b.worker) || !w.hedging.CompareAndSwap(false, true) {
		return false
	}
	reqs := b.reqs // renew drops b.reqs while this attempt may run on
	w.start(ctx, reqs, make([]error, len(reqs)), done, func() { w.hedging.Store(false) })
	return true
}

// An answer is one attempt's: its errors, and when it was sent.
type answer struct {
	errs []error
	sent int64
}

// start sends one attempt in a goroutine of its own, which runs then (if
// given) after the Renewer returned, and hands its answer to done.
func (w *Watchdog[I]) start(ctx context.Context, reqs []Renewal[I], errs []error, done chan<- answer, then ...func()) {
	if d, ok := ctx.Deadline(); ok {
		until := w.at(d)
		for old := w.sendsUntil.Load(); until > old && !w.sendsUntil.CompareAndSwap(old, until); old = w.sendsUntil.Load() {
		}
	}
	w.sends.Add(1)
	go func() {
		defer w.sends.Done()
		sent := w.now()
		w.renewer.Renew(ctx, reqs, errs)
		for _, f := range then {
			f()
		}
		w.observe(ctx, sent, errs)
		done <- answer{errs: errs, sent: sent}
	}()
}

// observe counts in the round trips an attempt sent at sent that left
// errs, if it says something of them: it was answered for every renewal,
// or given up at its limit.
//
// An attempt that failed without an answer for every renewal (a node that
// refused the connection, go-redis dialing it again meanwhile, while the
// other nodes of a Cluster answered at once) says nothing of the round
// trip: counting it made every lease of a killed Cluster primary hopeless,
// unsent and lost, although its replica was promoted seconds before their
// deadline (lease's TestClusterKilledPrimaryKeepsLeases). Nor does one
// cancelled because the other attempt answered, whenever it returns: one
// hung on a silently dead connection returns at the client's read timeout
// (3s for go-redis without ContextTimeoutEnabled), and counted as given
// up, it set patience to those seconds, so that the next second attempt
// waited past the loss of a lease whose connection died again.
func (w *Watchdog[I]) observe(ctx context.Context, sent int64, errs []error) {
	took := time.Duration(w.now() - sent)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		w.trips.observe(sent, took, true, len(errs))
	case decided(errs):
		w.trips.observe(sent, took, false, len(errs))
	}
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
		e.state, e.idleAt = idle, now
		w.requeue(e)
	}
	// A quicker answer, or the watchdog no longer behind, may let a
	// set-aside lease go again.
	if w.readmit(now) {
		w.signal(1)
	}
	return lost
}
