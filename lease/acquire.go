package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/bridge"
	"github.com/tenure-go/tenure/watchdog"
)

// acquireConfig validates name and opts and returns the settings for one
// acquisition.
func (m *Manager) acquireConfig(name string, opts []AcquireOption) (acquireConfig, error) {
	if err := checkName(name); err != nil {
		return acquireConfig{}, err
	}
	a := m.cfg.acquireConfig
	if len(opts) > 0 {
		// Options get a copy of their own: taking a's address for them
		// would move it to the heap for every acquire, options or not.
		p := new(acquireConfig)
		*p = a
		for _, o := range opts {
			if o == nil {
				return acquireConfig{}, fmt.Errorf("%w: nil option", ErrInvalidOption)
			}
			if err := o.applyAcquire(p); err != nil {
				return acquireConfig{}, err
			}
		}
		a = *p
	}
	if err := m.cfg.check(&a); err != nil {
		return acquireConfig{}, err
	}
	return a, nil
}

// TryAcquire makes one attempt to acquire name: it returns ErrNotAcquired at
// once if the name is held.
func (m *Manager) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return m.acquire(ctx, name, opts, false, holding{})
}

// Acquire waits until it holds name or ctx ends. ctx bounds the wait only:
// cancelling it after Acquire returned does not release the lease, whose
// context keeps ctx's values (trace spans) but not its cancellation.
//
// While the name is held, Acquire retries after each step of the backoff
// policy (WithBackOff), never sleeping past the holder's remaining TTL. A
// server error or an unknown outcome ends the wait with that error. When ctx
// ends first the error wraps ErrNotAcquired, ctx's error and its cause
// (context.WithTimeoutCause), so errors.Is finds each.
func (m *Manager) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return m.acquire(ctx, name, opts, true, holding{})
}

// acquire is Acquire (wait) or TryAcquire, reported to the hooks, of the
// kind of hold k says.
func (m *Manager) acquire(ctx context.Context, name string, opts []AcquireOption, wait bool, k holding) (*Lease, error) {
	h := m.cfg.hooks
	if h.AcquireStart == nil && h.AcquireDone == nil {
		var attempts int
		return m.acquireCounted(ctx, name, opts, wait, k, &attempts)
	}
	return m.acquireHooked(ctx, name, opts, wait, k)
}

// acquireHooked is acquire reported to the hooks. Apart from acquire, so
// that a manager without hooks pays for no closure.
func (m *Manager) acquireHooked(ctx context.Context, name string, opts []AcquireOption, wait bool, k holding) (l *Lease, err error) {
	h := m.cfg.hooks
	if h.AcquireStart != nil {
		ctx = h.AcquireStart(ctx, name)
	}
	attempts := 0
	if h.AcquireDone != nil {
		start := time.Now()
		defer func() {
			h.AcquireDone(ctx, AcquireInfo{Name: name, Lease: l, Attempts: attempts, Waited: time.Since(start), Err: err})
		}()
	}
	return m.acquireCounted(ctx, name, opts, wait, k, &attempts)
}

// acquireCounted makes the attempts of one acquisition, counting them.
func (m *Manager) acquireCounted(ctx context.Context, name string, opts []AcquireOption, wait bool, k holding, attempts *int) (*Lease, error) {
	a, err := m.acquireConfig(name, opts)
	if err != nil {
		return nil, err
	}
	a.holding = k
	if a.resize && a.limit == 0 {
		return nil, fmt.Errorf("%w: resizing is for a semaphore's permits (package semaphore)", ErrInvalidOption)
	}
	if err := a.permitCount(); err != nil {
		return nil, err
	}
	if err := m.supports(a); err != nil {
		return nil, err
	}
	req := backend.Request{Name: name, TTL: a.ttl, Owner: a.owner, Limit: a.limit, Resize: a.resize, Permits: a.permits}
	if !wait {
		return m.tryOnce(ctx, req, a, attempts)
	}
	return m.waitFor(ctx, req, a, attempts)
}

// tryOnce is TryAcquire's single attempt.
func (m *Manager) tryOnce(ctx context.Context, req backend.Request, a acquireConfig, attempts *int) (*Lease, error) {
	if r := m.wd.BehindReason(); r != watchdog.NotBehind {
		return nil, overloaded(req.Name, r, m.wd.Load(), nil)
	}
	*attempts++
	req.Token = m.token(a)
	l, res, err := m.try(ctx, req, a)
	switch {
	case err != nil:
		return nil, err
	case l != nil && m.handOver(l):
		if r := m.wd.BehindReason(); r != watchdog.NotBehind {
			// Won while the watchdog fell behind (a process short of
			// CPU answers late): held leases come first, and this one,
			// answered late, would be the first lost.
			m.giveBack(l)
			return nil, overloaded(req.Name, r, m.wd.Load(), nil)
		}
		return l, nil
	case res.HeldLimit > 0:
		return nil, limitMismatch(req, res)
	case res.Acquired:
		return nil, fmt.Errorf("%w: %q: it was won, but answered too late to be used", ErrNotAcquired, req.Name)
	}
	return nil, fmt.Errorf("%w: %s", ErrNotAcquired, heldBy(req, res, m.holdsLease(req)))
}

// limitMismatch is the error of a permit request refused because the
// name's permits are held under another N.
func limitMismatch(req backend.Request, res backend.Acquisition) error {
	return &bridge.LimitMismatch{Name: req.Name, Held: res.HeldLimit, Wanted: req.Limit}
}

// waitFor is Acquire's loop: attempt, and while the name is held, pause
// until a release message, the holder's TTL or the backoff step.
func (m *Manager) waitFor(ctx context.Context, req backend.Request, a acquireConfig, attempts *int) (*Lease, error) {
	w := m.newWait(req, a, attempts)
	defer w.end()
	return w.run(ctx)
}

// run is waitFor's loop, on a wait that lives on waitFor's stack: the
// uncontended acquire allocates none of it.
func (w *wait) run(ctx context.Context) (*Lease, error) {
	if err := w.behindOthers(ctx); err != nil {
		return nil, err
	}
	for {
		if r := w.m.wd.BehindReason(); r != watchdog.NotBehind {
			if err := w.waitForCapacity(ctx, r); err != nil {
				return nil, err
			}
			continue
		}
		l, res, err := w.attempt(ctx)
		switch {
		case err != nil:
			return nil, err
		case l != nil:
			return l, nil
		case res.Retired:
			continue // the token was spent: a fresh one may win at once
		}
		if err := w.pause(ctx, res); err != nil {
			return nil, err
		}
	}
}

// wait is one Acquire's wait for a name: the request it repeats, its
// registration with the notifier, the backoff policy and its timer, and
// whether the fair queue holds its place.
type wait struct {
	m        *Manager
	a        acquireConfig
	req      backend.Request
	channel  string
	attempts *int

	waiter *waiter // registered with the notifier; nil until needed
	policy backoff.BackOff
	timer  *time.Timer
	queued bool                // the fair queue holds req.Token: leave it when giving up
	held   bool                // the last attempt found the name held
	last   backend.Acquisition // what the last attempt that reached the server said
}

func (m *Manager) newWait(req backend.Request, a acquireConfig, attempts *int) wait {
	if a.fair {
		// One token for the whole wait: it is the waiter's place in the
		// queue.
		req.Token = m.token(a)
		req.Queue = a.queue
	}
	return wait{m: m, a: a, req: req, attempts: attempts}
}

// ch is the name's release channel, which only a wait that registers with
// the notifier needs.
func (w *wait) ch() string {
	if w.channel == "" {
		w.channel = w.m.layout.Channel(w.req.Name)
	}
	return w.channel
}

// end cleans up after the wait, however it ended: the notifier forgets the
// waiter, and a fair waiter that did not get the name leaves the queue, so
// that the others do not wait behind it until the queue forgets it.
func (w *wait) end() {
	w.unregister()
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.queued {
		w.m.leaveLater(w.req)
	}
}

func (w *wait) unregister() {
	if w.waiter != nil {
		w.m.notify.unregister(w.ch(), w.waiter)
		w.waiter = nil
	}
}

// behindOthers makes a barging wait start behind the waiters of its own
// manager that wait for the name already and could get in whenever it
// could: it waits for the next release instead of racing them (and, when
// the name was just released here, taking it back before they hear of
// it). A permit request with a larger n than theirs goes at once.
func (w *wait) behindOthers(ctx context.Context) error {
	m := w.m
	if w.a.fair || m.notify == nil || !m.notify.anyBarging() || !m.notify.waiting(w.ch(), w.req.Limit) {
		return nil
	}
	if w.waiter, _ = m.notify.register(w.ch(), false, 0, w.req.Limit); w.waiter == nil {
		return nil
	}
	select {
	case <-w.waiter.wake:
	case <-ctx.Done():
		return notAcquired(w.req.Name, false, false, ctxError(ctx))
	case <-m.closing:
		return ErrClosed
	case <-time.After(w.a.queue / 3):
		// The waiter ahead vanished without a word; look anyway.
	}
	return nil
}

// attempt makes one attempt: it returns the lease handed over, or what the
// server said (the name is held, or the token was spent), or an error that
// ends the wait.
func (w *wait) attempt(ctx context.Context) (*Lease, backend.Acquisition, error) {
	m := w.m
	*w.attempts++
	if !w.a.fair {
		w.req.Token = m.token(w.a)
	}
	l, res, err := m.try(ctx, w.req, w.a)
	w.held = err == nil && !res.Acquired && !res.Retired
	w.last = res
	if w.waiter != nil && err == nil && (l == nil || w.req.Limit == 0) {
		// Answered the wake-up: nobody else need be woken for it, whether
		// we won or someone elsewhere did. A permit won is another matter:
		// more may be free (a writer's release frees the name for every
		// reader), so the wake-up goes on to the next waiter when this one
		// unregisters.
		m.notify.tried(w.waiter, res.Arrival)
	}
	if l != nil {
		w.unregister()
		if m.handOver(l) {
			w.queued = false // taking the name took us out of the queue
			return l, res, nil
		}
		// Too late to hand over: try again, as for a held name.
	}
	switch {
	case err != nil:
		var u unsent
		if backend.MaybeApplied(err) && !errors.As(err, &u) {
			w.queued = false // the abandon that follows takes us out of the queue
		}
		return nil, res, err
	case res.HeldLimit > 0:
		// Refused at once, touching nothing: a place in the queue from an
		// earlier attempt (a set made anew under another N since) is
		// left when the wait ends.
		return nil, res, limitMismatch(w.req, res)
	case w.a.fair && res.Arrival == 0:
		// The attempt spent the waiter's token: it won a lease that came
		// too late and is being released under that token, or found the
		// token retired. The same token could be answered "held" just
		// before that release deletes the key, or be refused until the
		// retirement expires: go on with a new one (the old one left the
		// queue when it took the name, or when it was retired).
		w.req.Token = m.token(w.a)
		w.queued = false
	default:
		w.queued = w.a.fair
	}
	return nil, res, nil
}

// pause waits after an attempt that found the name held, until a release
// message wakes the waiter, the holder's TTL runs out or the backoff step
// passes; an error ends the wait.
func (w *wait) pause(ctx context.Context, res backend.Acquisition) error {
	m, a := w.m, w.a
	step, ok := w.nextStep()
	if !ok {
		return w.notAcquired(errBackOffStop)
	}
	// Keys expire at millisecond granularity; a millisecond more makes sure
	// the holder's key is gone when we look again.
	if res.HolderTTL >= 0 && res.HolderTTL+time.Millisecond < step {
		step = res.HolderTTL + time.Millisecond
	}
	if a.fair && step > a.queue/3 {
		step = a.queue / 3 // keep our place in the queue
	}
	if w.waiter == nil && m.notify != nil {
		var armed bool
		if w.waiter, armed = m.notify.register(w.ch(), a.fair, res.Arrival, w.req.Limit); armed {
			// We listen now, but a release since our attempt went unheard:
			// look again at once.
			return nil
		}
	}
	var wake <-chan struct{}
	if w.waiter != nil {
		wake = w.waiter.wake
	}
	switch err := w.sleep(ctx, step, wake); {
	case err == ErrClosed:
		return err
	case err != nil:
		return w.notAcquired(err)
	}
	return nil
}

// notAcquired is the error of a wait that ended for why: a barging permit
// request whose last attempt found too few permits says how many were
// free and how many it asked.
func (w *wait) notAcquired(why error) error {
	if w.held && !w.a.fair && w.req.Limit > 0 {
		return fmt.Errorf("%w: %s: %w", ErrNotAcquired, heldBy(w.req, w.last, false), why)
	}
	if w.held && !w.a.fair && (w.last.HeldByPermits || w.m.holdsLease(w.req)) {
		return fmt.Errorf("%w: %s: %w", ErrNotAcquired, heldBy(w.req, w.last, w.m.holdsLease(w.req)), why)
	}
	return notAcquired(w.req.Name, w.held, w.a.fair, why)
}

// waitForCapacity pauses a wait while the watchdog is behind with its
// renewals (ErrOverloaded, for reason), for one step of the backoff
// policy.
func (w *wait) waitForCapacity(ctx context.Context, reason watchdog.Reason) error {
	step, ok := w.nextStep()
	if !ok {
		return overloaded(w.req.Name, reason, w.m.wd.Load(), errBackOffStop)
	}
	switch err := w.sleep(ctx, step, nil); {
	case err == ErrClosed:
		return err
	case err != nil:
		return overloaded(w.req.Name, reason, w.m.wd.Load(), err)
	}
	return nil
}

// nextStep is the backoff policy's next step; false when it gave up.
func (w *wait) nextStep() (time.Duration, bool) {
	if w.policy == nil {
		w.policy = w.a.newBackOff()
	}
	step := w.policy.NextBackOff()
	return step, step != backoff.Stop
}

// sleep waits for step to pass or wake (which may be nil) to fire. It
// returns ctx's error (ctxError) when ctx ends first, and ErrClosed when
// the manager closes.
func (w *wait) sleep(ctx context.Context, step time.Duration, wake <-chan struct{}) error {
	if w.timer == nil {
		w.timer = time.NewTimer(step)
	} else {
		w.timer.Reset(step)
	}
	select {
	case <-w.timer.C:
		return nil
	case <-wake:
	case <-ctx.Done():
		w.timer.Stop()
		return ctxError(ctx)
	case <-w.m.closing:
		w.timer.Stop()
		return ErrClosed
	}
	w.timer.Stop() // Go 1.23 timers: no stale tick after Stop or Reset
	return nil
}

// overloaded is the error of an acquire refused, or a wait ended (why),
// while the watchdog was behind for reason: it matches ErrNotAcquired and
// ErrOverloaded, and says which fact made the watchdog behind.
func overloaded(name string, reason watchdog.Reason, load watchdog.Load, why error) error {
	if why == nil {
		// Formatted only when printed: callers short of CPU refuse many
		// of these a second (a TryAcquire loop), and the refusal must not
		// take the CPU the held leases' renewals need.
		return &overloadError{name: name, reason: reason, load: load}
	}
	return fmt.Errorf("%w: %q: %w (%v): %w", ErrNotAcquired, name, bare(ErrOverloaded), whyBehind(reason, load), why)
}

// overloadError is TryAcquire's refusal while the watchdog is behind.
type overloadError struct {
	name   string
	reason watchdog.Reason
	load   watchdog.Load // at the refusal
}

func (e *overloadError) Error() string {
	return fmt.Sprintf("%v: %q: %v (%v)", ErrNotAcquired, e.name, bare(ErrOverloaded), whyBehind(e.reason, e.load))
}

// whyBehind says which fact refused and, for demand over capacity, the
// figures it weighed: a refusal must show whether the capacity measured
// was what the server and the process could carry.
func whyBehind(reason watchdog.Reason, load watchdog.Load) string {
	if reason != watchdog.DemandOverCapacity {
		return reason.String()
	}
	return reason.String() + ": " + load.String()
}

// Is makes errors.Is find ErrNotAcquired and ErrOverloaded, as it does in
// every other refusal.
func (e *overloadError) Is(target error) bool {
	return target == ErrNotAcquired || target == ErrOverloaded
}

// handOver reports whether l may still be handed to the caller: its local
// deadline has not passed. try checks the reply's delay, but the caller
// gets the lease later, and a stall in between (a descheduled goroutine, a
// lock) must not hand over a lease whose context should be cancelled
// already (S1). A lease too late is ended and released in the background.
func (m *Manager) handOver(l *Lease) bool {
	// The watchdog may have lost it already: it does so a slack before
	// the deadline.
	if time.Now().Before(l.Deadline()) && l.Err() == nil {
		return true
	}
	if m.wd.Remove(l.entry) == nil {
		l.end(ErrLost)
	}
	m.releaseUnused(l)
	return false
}

// giveBack ends l, won but not to be handed over, and releases it in the
// background.
func (m *Manager) giveBack(l *Lease) {
	if m.wd.Remove(l.entry) == nil {
		l.end(ErrReleased)
	}
	m.releaseUnused(l)
}

func (m *Manager) releaseUnused(l *Lease) {
	item := l.item()
	m.bg.spawn(func() { m.cleanUp("clean-up release", item.Name, m.releaseOp(item)) })
}

// try makes one attempt. It returns the lease, or when the name is held
// what the server said of the holder (its remaining TTL, negative if
// unknown, and our place in a fair queue), or, with res.Acquired and no
// lease, that the attempt won the name but came back too late to use, or an
// error.
func (m *Manager) try(ctx context.Context, req backend.Request, a acquireConfig) (*Lease, backend.Acquisition, error) {
	if !m.bg.enter() {
		return nil, backend.Acquisition{}, ErrClosed
	}
	defer m.bg.leave()
	if ctx.Err() != nil {
		return nil, backend.Acquisition{}, unsent{notAcquired(req.Name, false, false, ctxError(ctx))}
	}
	sent := time.Now()
	res, err := m.send(ctx, req)
	if err != nil {
		return nil, backend.Acquisition{}, err
	}
	if !res.Acquired {
		return nil, res, nil
	}
	if time.Since(sent) >= a.ttl-m.cfg.drift(a.ttl) {
		// The reply took longer than the lease may be trusted for: it is
		// useless, and holding it would only block the name. res says
		// Acquired with no lease: won, too late.
		m.releaseLater(m.requestItem(req, res))
		return nil, res, nil
	}
	l, err := m.hold(ctx, req, a, res, sent)
	return l, res, err
}

// unsent is the error of an attempt whose caller gave up before its
// request went out: the server saw nothing, so no abandon follows, and a
// fair waiter's place from an earlier attempt is still to be left. Without
// the mark the error (a context's) would read as maybe applied, and the
// place would block the waiters behind it until the queue forgot it.
type unsent struct{ error }

func (e unsent) Unwrap() error { return e.error }

// send sends one acquire request. When the caller gives up before the
// answer (or the answer is unknown), the request is taken back in the
// background (S7): it may have been executed, or may yet be.
func (m *Manager) send(ctx context.Context, req backend.Request) (backend.Acquisition, error) {
	if m.direct(ctx) {
		// The common case costs no closure: the client ends the round
		// trip when ctx ends, so nobody is left behind to clean up.
		res, err := m.be.Acquire(ctx, req)
		if err == nil {
			return res, nil
		}
		return backend.Acquisition{}, m.failedSend(ctx, req, err, false)
	}
	return m.sendDetached(ctx, req)
}

// sendDetached is send on a client that does not end a round trip when its
// context ends (see detach).
func (m *Manager) sendDetached(ctx context.Context, req backend.Request) (backend.Acquisition, error) {
	var res backend.Acquisition
	err, left := m.detach(ctx, func(ctx context.Context) (err error) {
		res, err = m.be.Acquire(ctx, req)
		return err
	}, func(err error) {
		// The caller gave up before the answer came; now it has.
		switch {
		case err == nil && res.Acquired:
			m.cleanUp("clean-up release", req.Name, m.releaseOp(m.requestItem(req, res)))
		case err == nil && req.Queue > 0:
			// A fair attempt answered "held" has put us in the queue (or
			// kept us there), behind the caller's back: leave it, or
			// those behind wait until the queue forgets us.
			m.cleanUp("leaving the queue", req.Name, m.leaveOp(req))
		case backend.MaybeApplied(err):
			m.cleanUp("abandoning an unanswered acquire", req.Name, m.abandonOp(req))
		}
	})
	if err == nil {
		return res, nil
	}
	// res is not ours to read: a round trip the caller left may still be
	// writing it.
	return backend.Acquisition{}, m.failedSend(ctx, req, err, left)
}

// failedSend is send's error, after taking back an attempt the server may
// have applied (S7) unless the caller left and its late answer does that.
func (m *Manager) failedSend(ctx context.Context, req backend.Request, err error, left bool) error {
	if !left && backend.MaybeApplied(err) {
		m.abandonLater(req)
	}
	if ctx.Err() != nil {
		return notAcquired(req.Name, false, false, errors.Join(ctxError(ctx), err))
	}
	return fmt.Errorf("lease: acquire %q: %w", req.Name, err)
}

// hold makes the lease of a successful request and puts it under the
// watchdog, unless the manager closed meanwhile.
func (m *Manager) hold(ctx context.Context, req backend.Request, a acquireConfig, res backend.Acquisition, sent time.Time) (*Lease, error) {
	l := &Lease{m: m, name: req.Name, token: req.Token, fence: res.Fence, explicitInterval: a.interval > 0,
		owner: req.Owner, permit: req.Limit > 0, permits: req.Permits, depth: 1}
	if broken { // tenure_broken builds only: broken_on.go
		l.fence = breakFence(req.Name, l.fence)
	}
	l.acquired = time.Now()
	l.values = values{parent: ctx, l: l}
	l.ctx, l.cancel = context.WithCancelCause(&l.values)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		l.cancel(ErrClosed)
		m.releaseLater(m.requestItem(req, res))
		return nil, ErrClosed
	}
	var err error
	l.entry, err = m.wd.Add(req.Item(), req.TTL, sent, a.renewInterval(), !a.noRenew, (*holder)(l))
	if err != nil { // the watchdog closes only after m.closed is set
		panic("lease: watchdog closed while the manager is open")
	}
	m.held[l] = struct{}{}
	if l.owner == "" && !l.permit {
		m.heldNames[l.name]++
	}
	return l, nil
}

// holdsLease reports whether m holds a lease (not a reentrant lock or a
// permit) on req's name itself, for the error of a lease request that
// found the name held.
func (m *Manager) holdsLease(req backend.Request) bool {
	if req.Limit > 0 || req.Owner != "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heldNames[req.Name] > 0
}

// requestItem is what to release to undo a successful request nobody will
// use: for a reentrant lock, the one entry it added, never the owner's
// whole count: an owner, even a fresh one, may have gone out in a context
// (reentrant.Lock.Context) and been entered by others meanwhile.
func (m *Manager) requestItem(req backend.Request, res backend.Acquisition) backend.Item {
	it := req.Item()
	if it.Reentrant {
		it.Op = req.Token
		it.Count = 1
	}
	return it
}
