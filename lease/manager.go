package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/watchdog"
)

// A Manager acquires leases on one Redis deployment and keeps them alive
// with one watchdog: a fixed handful of goroutines, whatever the number of
// leases held. It is safe for concurrent use. Close releases what it holds.
type Manager struct {
	be       backend.Backend
	wd       *watchdog.Watchdog
	notify   *notifier // nil without a Redis client (the fake backend)
	layout   backend.Layout
	cfg      config
	ctxBound bool // the client ends a command when its context ends
	quorum   bool // NewQuorum: no reentrant locks, no fair queue

	mu      sync.Mutex
	held    map[*Lease]struct{}
	closed  bool
	closing chan struct{}  // closed by Close: wakes waiters
	ops     sync.WaitGroup // acquire attempts in flight: Close waits for them
	bg      sync.WaitGroup // clean-up round trips: Close waits for them

	// Losses are reported (logged) by a goroutine of their own, so that a
	// slow log handler never delays the watchdog cancelling other leases:
	// when an outage loses a thousand leases at the same deadline, each
	// must be cancelled by it, not after a thousand log lines.
	losses     chan lossReport
	unreported atomic.Int64 // losses dropped because the queue was full
	stopReport chan struct{}
	reported   chan struct{}
}

type lossReport struct {
	ctx    context.Context // the lease's, for the values a log handler may use (trace ids)
	name   string
	fence  int64
	reason error
}

// New returns a Manager over client, which the caller keeps and closes after
// the Manager. Options are validated here: a bad value is an error wrapping
// ErrInvalidOption. New makes no round trip.
//
// Create the client with ContextTimeoutEnabled where you can: the manager
// then lets go-redis end a round trip when its context ends, instead of
// waiting for it in a goroutine of its own (see the package documentation,
// "Timeouts").
func New(client redis.UniversalClient, opts ...Option) (*Manager, error) {
	if client == nil || isNilPointer(client) {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	m := newManager(cfg.redisBackend(client), cfg)
	m.ctxBound = ctxBound(client)
	m.notify = newNotifier(client)
	return m, nil
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

func buildConfig(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return config{}, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o.applyManager(&cfg); err != nil {
			return config{}, err
		}
	}
	if err := cfg.check(&cfg.acquireConfig); err != nil {
		return config{}, err
	}
	return cfg, nil
}

func newManager(be backend.Backend, cfg config) *Manager {
	m := &Manager{
		be:         be,
		wd:         watchdog.New(be, watchdog.Config{Drift: cfg.drift}),
		layout:     backend.Layout{Prefix: cfg.prefix},
		cfg:        cfg,
		held:       make(map[*Lease]struct{}),
		closing:    make(chan struct{}),
		losses:     make(chan lossReport, 1024),
		stopReport: make(chan struct{}),
		reported:   make(chan struct{}),
		ctxBound:   true, // the fake backend honours contexts; New checks a real client
	}
	go m.report()
	return m
}

// KeyPrefix returns the prefix of the manager's keys (WithKeyPrefix), for
// packages that read them, such as election.
func (m *Manager) KeyPrefix() string { return m.cfg.prefix }

// reportLoss queues a lost lease for reporting; it never blocks.
func (m *Manager) reportLoss(l *Lease, reason error) {
	select {
	case m.losses <- lossReport{ctx: l.ctx, name: l.name, fence: l.fence, reason: reason}:
	default:
		m.unreported.Add(1)
	}
}

// report is the goroutine that logs losses until Close.
func (m *Manager) report() {
	defer close(m.reported)
	for {
		select {
		case r := <-m.losses:
			m.logLoss(r)
		case <-m.stopReport:
			for {
				select {
				case r := <-m.losses:
					m.logLoss(r)
				default:
					return
				}
			}
		}
	}
}

func (m *Manager) logLoss(r lossReport) {
	m.cfg.logger.WarnContext(r.ctx, "tenure: lease lost", "name", r.name, "fence", r.fence, "cause", r.reason)
	if n := m.unreported.Swap(0); n > 0 {
		m.cfg.logger.Warn("tenure: more leases lost than could be logged", "unlogged", n)
	}
}

// acquireConfig validates name and opts and returns the settings for one
// acquisition.
func (m *Manager) acquireConfig(name string, opts []AcquireOption) (acquireConfig, error) {
	if err := checkName(name); err != nil {
		return acquireConfig{}, err
	}
	a := m.cfg.acquireConfig
	for _, o := range opts {
		if o == nil {
			return acquireConfig{}, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o.applyAcquire(&a); err != nil {
			return acquireConfig{}, err
		}
	}
	if err := m.cfg.check(&a); err != nil {
		return acquireConfig{}, err
	}
	return a, nil
}

// TryAcquire makes one attempt to acquire name: it returns ErrNotAcquired at
// once if the name is held.
func (m *Manager) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return m.acquire(ctx, name, opts, false, "", false)
}

// Acquire waits until it holds name or ctx ends. ctx bounds the wait only:
// cancelling it after Acquire returned does not release the lease, whose
// context keeps ctx's values (trace spans) but not its cancellation.
//
// While the name is held, Acquire retries after each step of the backoff
// policy (WithBackOff), never sleeping past the holder's remaining TTL. A
// server error or an unknown outcome ends the wait with that error. When ctx
// ends first the error wraps both ErrNotAcquired and ctx's error.
func (m *Manager) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return m.acquire(ctx, name, opts, true, "", false)
}

// acquire is Acquire (wait) or TryAcquire, reported to the hooks; with an
// owner, of a reentrant lock.
func (m *Manager) acquire(ctx context.Context, name string, opts []AcquireOption, wait bool, owner string, exclusive bool) (l *Lease, err error) {
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
	a, err := m.acquireConfig(name, opts)
	if err != nil {
		return nil, err
	}
	a.owner, a.exclusive = owner, exclusive
	if err := m.supports(a); err != nil {
		return nil, err
	}
	return m.acquireWith(ctx, name, a, wait, &attempts)
}

// acquireWith makes the attempts of one acquisition, counting them.
func (m *Manager) acquireWith(ctx context.Context, name string, a acquireConfig, wait bool, attempts *int) (*Lease, error) {
	req := backend.Request{Name: name, TTL: a.ttl, Owner: a.owner, Exclusive: a.exclusive}
	if !wait {
		*attempts++
		req.Token = newToken()
		l, _, err := m.try(ctx, req, a)
		if err != nil {
			return nil, err
		}
		if l == nil || !m.handOver(l) {
			return nil, fmt.Errorf("%w: %q", ErrNotAcquired, name)
		}
		return l, nil
	}
	if a.fair {
		// One token for the whole wait: it is the waiter's place in the
		// queue.
		req.Token = newToken()
		req.Queue = a.queue
	}
	var (
		policy  backoff.BackOff
		timer   *time.Timer
		w       *waiter
		channel = m.layout.Channel(name)
		queued  bool
	)
	defer func() {
		if w != nil {
			m.notify.unregister(channel, w)
		}
	}()
	if !a.fair && m.notify != nil && m.notify.waiting(channel) {
		// Others of this manager wait for the name: wait behind them for
		// the next release instead of racing them (and, when the name was
		// just released here, taking it back before they hear of it).
		w, _ = m.notify.register(channel, false, 0)
	}
	for {
		if w != nil && *attempts == 0 {
			select {
			case <-w.wake:
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %q: %w", ErrNotAcquired, name, context.Cause(ctx))
			case <-m.closing:
				return nil, ErrClosed
			case <-time.After(a.queue / 3):
				// The waiter ahead vanished without a word; look anyway.
			}
		}
		*attempts++
		if !a.fair {
			req.Token = newToken()
		}
		l, res, err := m.try(ctx, req, a)
		holderTTL := res.HolderTTL
		if w != nil && err == nil {
			// Answered the wake-up: nobody else need be woken for it, whether we
			// won or someone elsewhere did.
			m.notify.tried(w, res.Arrival)
		}
		if l != nil {
			if w != nil {
				m.notify.unregister(channel, w)
				w = nil
			}
			if m.handOver(l) {
				return l, nil
			}
			// Too late to hand over: try again, as for a held name.
		}
		if err != nil {
			if queued && !backend.MaybeApplied(err) {
				// Tried and failed outright: the queue must not keep
				// our place for the others to wait behind.
				m.leaveLater(req)
			}
			return nil, err
		}
		queued = a.fair
		if policy == nil {
			policy = a.newBackOff()
		}
		step := policy.NextBackOff()
		if step == backoff.Stop {
			if queued {
				m.leaveLater(req)
			}
			return nil, fmt.Errorf("%w: %q: the backoff policy gave up", ErrNotAcquired, name)
		}
		// Keys expire at millisecond granularity; a millisecond more makes
		// sure the holder's key is gone when we look again.
		if holderTTL >= 0 && holderTTL+time.Millisecond < step {
			step = holderTTL + time.Millisecond
		}
		if a.fair && step > a.queue/3 {
			step = a.queue / 3 // keep our place in the queue
		}
		if w == nil && m.notify != nil {
			var armed bool
			if w, armed = m.notify.register(channel, a.fair, res.Arrival); armed {
				// We listen now, but a release since our attempt went
				// unheard: look again at once.
				continue
			}
		}
		var wake <-chan struct{}
		if w != nil {
			wake = w.wake
		}
		if timer == nil {
			timer = time.NewTimer(step)
			defer timer.Stop()
		} else {
			timer.Reset(step)
		}
		select {
		case <-timer.C:
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-ctx.Done():
			if queued {
				m.leaveLater(req)
			}
			return nil, fmt.Errorf("%w: %q: %w", ErrNotAcquired, name, context.Cause(ctx))
		case <-m.closing:
			return nil, ErrClosed
		}
	}
}

// handOver reports whether l may still be handed to the caller: its local
// deadline has not passed. try checks the reply's delay, but the caller
// gets the lease later, and a stall in between (a descheduled goroutine, a
// lock) must not hand over a lease whose context should be cancelled
// already (S1). A lease too late is ended and released in the background.
func (m *Manager) handOver(l *Lease) bool {
	if time.Now().Before(l.Deadline()) {
		return true
	}
	if m.wd.Remove(l.entry) == nil {
		l.end(ErrLost)
	}
	if m.join(&m.ops) {
		m.releaseLater(l.item())
		m.ops.Done()
	}
	return false
}

// leaveLater takes a fair waiter that gives up out of the queue, in the
// background: otherwise the others would wait behind it until the queue
// forgets it.
func (m *Manager) leaveLater(req backend.Request) {
	if !m.join(&m.ops) {
		return // Close is under way; the queue forgets us soon enough
	}
	defer m.ops.Done()
	m.inBackground("leaving the queue", req.Name, func(ctx context.Context) error { return m.be.Leave(ctx, req) })
}

// try makes one attempt. It returns the lease, or when the name is held
// (or the attempt came back too late to use) what the server said of the
// holder (its remaining TTL, negative if unknown, and our place in a fair
// queue), or an error.
func (m *Manager) try(ctx context.Context, req backend.Request, a acquireConfig) (*Lease, backend.Acquisition, error) {
	name := req.Name
	if !m.join(&m.ops) {
		return nil, backend.Acquisition{}, ErrClosed
	}
	defer m.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, backend.Acquisition{}, fmt.Errorf("%w: %q: %w", ErrNotAcquired, name, context.Cause(ctx))
	}
	sent := time.Now()
	var res backend.Acquisition
	err, left := m.detach(ctx, func(ctx context.Context) (err error) {
		res, err = m.be.Acquire(ctx, req)
		return err
	}, func(err error) {
		// The caller gave up before the answer came; now it has.
		switch {
		case err == nil && res.Acquired:
			m.cleanUp("clean-up release", name, m.releaseOp(m.requestItem(req, res)))
		case backend.MaybeApplied(err):
			m.cleanUp("abandoning an unanswered acquire", name, m.abandonOp(req))
		}
	})
	if err != nil {
		if !left && backend.MaybeApplied(err) {
			// S7: the server may have executed the attempt, or may yet:
			// take our token back so that no phantom lease blocks the name.
			m.inBackground("abandoning an unanswered acquire", name, m.abandonOp(req))
		}
		if ctx.Err() != nil {
			return nil, backend.Acquisition{}, fmt.Errorf("%w: %q: %w", ErrNotAcquired, name, errors.Join(context.Cause(ctx), err))
		}
		return nil, backend.Acquisition{}, fmt.Errorf("tenure: acquire %q: %w", name, err)
	}
	if !res.Acquired {
		return nil, res, nil
	}
	l := &Lease{m: m, name: name, token: req.Token, fence: res.Fence, explicitInterval: a.interval > 0,
		owner: req.Owner, exclusive: req.Exclusive, depth: 1}
	if broken { // tenure_broken builds only: broken_on.go
		l.fence = breakFence(name, l.fence)
	}
	if time.Since(sent) >= a.ttl-m.cfg.drift(a.ttl) {
		// The reply took longer than the lease may be trusted for: it is
		// useless, and holding it would only block the name.
		m.releaseLater(m.requestItem(req, res))
		return nil, backend.Acquisition{}, nil
	}
	l.acquired = time.Now()
	l.ctx, l.cancel = context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), leaseKey{}, l))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		l.cancel(ErrClosed)
		m.releaseLater(m.requestItem(req, res))
		return nil, backend.Acquisition{}, ErrClosed
	}
	item := req.Item()
	l.entry, err = m.wd.Add(item, sent, a.renewInterval(), !a.noRenew, (*holder)(l))
	if err != nil { // the watchdog closes only after m.closed is set
		panic("tenure: watchdog closed while the manager is open")
	}
	m.held[l] = struct{}{}
	return l, res, nil
}

// requestItem is what to release to undo a successful request nobody will
// use: for a reentrant lock, the one entry it added (all of them when the
// owner is the request's alone).
func (m *Manager) requestItem(req backend.Request, res backend.Acquisition) backend.Item {
	it := req.Item()
	if it.Reentrant {
		it.Op = req.Token
		if !req.Exclusive {
			it.Count = 1
		}
	}
	return it
}

// join counts one more piece of work on wg, which Close waits for, unless
// the manager is closed (and Close may be waiting on wg already).
func (m *Manager) join(wg *sync.WaitGroup) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	wg.Add(1)
	return true
}

// cleanUp makes a best-effort round trip, bounded by the op timeout, that
// no caller waits for: a failure only leaves a key to expire by its TTL.
func (m *Manager) cleanUp(what, name string, op func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.opTimeout)
	defer cancel()
	if err := op(ctx); err != nil && !errors.Is(err, backend.ErrNotHeld) {
		m.cfg.logger.Debug("tenure: "+what+" failed; the key expires by its TTL", "name", name, "error", err)
	}
}

// inBackground runs cleanUp in a goroutine that Close waits for. Callers
// are acquire attempts, which Close waits for first, so the count of
// background work is never zero while Close might be waiting on it.
func (m *Manager) inBackground(what, name string, op func(ctx context.Context) error) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		m.cleanUp(what, name, op)
	}()
}

// abandonOp takes back an acquire whose outcome is unknown (S7).
func (m *Manager) abandonOp(req backend.Request) func(ctx context.Context) error {
	return func(ctx context.Context) error { return m.be.Abandon(ctx, req) }
}

// releaseOp releases a lease nobody will use.
func (m *Manager) releaseOp(item backend.Item) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		errs := make([]error, 1)
		m.be.Release(ctx, []backend.Item{item}, errs)
		return errs[0]
	}
}

// releaseLater releases a lease nobody will use, in the background.
func (m *Manager) releaseLater(item backend.Item) {
	m.inBackground("clean-up release", item.Name, m.releaseOp(item))
}

// Do acquires name (waiting as Acquire does), runs fn under the lease and
// releases it when fn returns, even if fn panics. fn's context is cancelled
// when ctx ends or the lease is lost; its cause tells which. Do returns fn's
// error; when the lease ended before fn returned, the error also wraps
// ErrLost (or ErrClosed), even if fn returned nil.
func (m *Manager) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidOption)
	}
	l, err := m.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer func() {
		stop()
		cancel(nil)
		ended := l.Err()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.opTimeout)
		defer rcancel()
		if rerr := l.Release(rctx); rerr != nil && ended == nil {
			// The work is done; a failed release only leaves the name
			// blocked until its TTL runs out.
			m.cfg.logger.Warn("tenure: release after Do failed; the lease expires by its TTL",
				"name", name, "fence", l.fence, "error", rerr)
		}
		if ended != nil {
			if err != nil {
				err = fmt.Errorf("%w (and the lease on %q ended before it returned: %w)", err, name, ended)
			} else {
				err = fmt.Errorf("tenure: lease on %q ended before the work returned: %w", name, ended)
			}
		}
	}()
	return fn(fnCtx)
}

// Close cancels every lease the manager holds (with cause ErrClosed),
// releases them in one pipelined round trip per batch, stops the watchdog
// and waits for every goroutine the manager started. Waiting Acquire calls
// return ErrClosed. Close does not close the Redis client. It returns the
// release errors, if any; a second Close returns nil.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.closing)
	leases := make([]*Lease, 0, len(m.held))
	for l := range m.held {
		leases = append(leases, l)
	}
	m.mu.Unlock()

	// Work stops first, then the names are freed.
	items := make([]backend.Item, 0, len(leases))
	for _, l := range leases {
		if l.end(ErrClosed) {
			items = append(items, l.item())
		}
	}
	m.wd.Close()

	var errs []error
	const batch = 1000
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.opTimeout)
	defer cancel()
	res := make([]error, min(batch, len(items)))
	for len(items) > 0 {
		n := min(batch, len(items))
		m.be.Release(ctx, items[:n], res[:n])
		for i, err := range res[:n] {
			if err != nil && !errors.Is(err, backend.ErrNotHeld) {
				errs = append(errs, fmt.Errorf("tenure: release %q on close: %w", items[i].Name, err))
			}
		}
		items = items[n:]
	}
	// An attempt still in flight sees the manager closed when it returns,
	// and hands its lease to a clean-up round trip.
	m.ops.Wait()
	m.bg.Wait()
	if c, ok := m.be.(interface{ Close() }); ok {
		c.Close() // quorum mode: requests to slow nodes still running
	}
	if m.notify != nil {
		m.notify.close()
	}
	close(m.stopReport)
	<-m.reported
	return errors.Join(errs...)
}

// newToken returns 128 random bits from crypto/rand, hex-encoded.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
