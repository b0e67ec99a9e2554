package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/watchdog"
)

// A Manager acquires leases on one Redis deployment and keeps them alive
// with one watchdog: a fixed handful of goroutines, whatever the number of
// leases held. It is safe for concurrent use. Close releases what it holds.
type Manager struct {
	be       backend.Backend
	wd       *watchdog.Watchdog[backend.Item]
	notify   *notifier // nil without a Redis client (the fake backend)
	layout   backend.Layout
	cfg      config
	ctxBound bool                  // the client ends a command when its context ends
	client   redis.UniversalClient // New's; nil for NewQuorum's and leasetest's
	quorum   bool                  // NewQuorum: no reentrant locks, no fair queue

	mu   sync.Mutex
	held map[*Lease]struct{}
	// heldNames counts m's held leases (not reentrant locks or permits)
	// by name, so that a lease request that finds its name held can say
	// that m itself holds it.
	heldNames map[string]int
	closed    bool
	closing   chan struct{} // closed by Close: wakes waiters
	bg        background    // attempts in flight and clean-ups: Close waits for them

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
	// behind: the lease's renewal was never sent, for the watchdog was
	// behind (watchdog.ErrBehind): a loss to overload, not to an outage.
	behind bool
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
	m.client = client
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
		wd:         watchdog.New(backend.Renewer(be), watchdog.Config{Drift: cfg.drift}),
		layout:     backend.Layout{Prefix: cfg.prefix},
		cfg:        cfg,
		held:       make(map[*Lease]struct{}),
		heldNames:  make(map[string]int),
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
	case m.losses <- lossReport{ctx: l.ctx, name: l.name, fence: l.fence, reason: reason, behind: errors.Is(reason, watchdog.ErrBehind)}:
	default:
		m.unreported.Add(1)
	}
}

// lossWindow is how long report gathers losses into one log line: a burst
// of losses (an outage, an overloaded server) is a line a second, not a
// line a lease.
const lossWindow = time.Second

// lossNames is how many names a summary line of losses gives.
const lossNames = 5

// report is the goroutine that logs losses until Close: a loss alone in
// its window on a line of its own, with its name, fence and cause; several
// as one summary.
func (m *Manager) report() {
	defer close(m.reported)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case r := <-m.losses:
			timer.Reset(lossWindow)
			m.logLosses(m.gather(r, timer.C))
		case <-m.stopReport:
			if batch := m.drain(nil); len(batch) > 0 || m.unreported.Load() > 0 {
				m.logLosses(batch)
			}
			return
		}
	}
}

// gather returns first and the losses reported until window fires or the
// manager closes.
func (m *Manager) gather(first lossReport, window <-chan time.Time) []lossReport {
	batch := []lossReport{first}
	for {
		select {
		case r := <-m.losses:
			batch = append(batch, r)
		case <-window:
			return batch
		case <-m.stopReport:
			return m.drain(batch)
		}
	}
}

// drain appends the losses queued now to batch.
func (m *Manager) drain(batch []lossReport) []lossReport {
	for {
		select {
		case r := <-m.losses:
			batch = append(batch, r)
		default:
			return batch
		}
	}
}

// logLosses logs a window's losses: one on its own line, several (or any
// that the queue could not hold) on one summary line, with the count by
// reason and the first names.
func (m *Manager) logLosses(batch []lossReport) {
	unlogged := m.unreported.Swap(0)
	if len(batch) == 1 && unlogged == 0 {
		r := batch[0]
		m.cfg.logger.WarnContext(r.ctx, "tenure: lease lost", "name", r.name, "fence", r.fence, "cause", r.reason, "overloaded", r.behind)
		return
	}
	var expired, takenOver, deleted, behind int
	names := make([]string, 0, lossNames)
	for _, r := range batch {
		switch lossReason(r.reason) {
		case LossDeleted:
			deleted++
		case LossTakenOver:
			takenOver++
		default:
			expired++
		}
		if r.behind {
			behind++
		}
		if len(names) < lossNames {
			names = append(names, r.name)
		}
	}
	m.cfg.logger.Warn("tenure: leases lost", "count", int64(len(batch))+unlogged, "window", lossWindow,
		"expired", expired, "taken_over", takenOver, "deleted", deleted, "unclassified", unlogged,
		"while_overloaded", behind, "first", names)
}

// Do acquires name (waiting as Acquire does), runs fn under the lease and
// releases it when fn returns, even if fn panics. fn's context is cancelled
// when ctx ends or the lease is lost; its cause tells which. Do returns fn's
// error; when the lease ended before fn returned, or the release found it
// deleted or taken over, the error also wraps ErrLost (or ErrClosed), even
// if fn returned nil; an fn that returns the cause itself
// (context.Cause(ctx)) gets it said once.
//
// fn gets the lease, and so its fencing token, from its context:
//
//	err := m.Do(ctx, "report", func(ctx context.Context) error {
//		l, _ := lease.FromContext(ctx) // always there under Do
//		return store.Write(ctx, l.Fence(), data)
//	})
//
// Pass the fence to whatever fn writes (docs/design.md, S5): it is what
// keeps a write from a holder paused past its lease from being applied.
func (m *Manager) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidOption)
	}
	l, err := m.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	return l.run(ctx, fn)
}

// run is Do once l is held: fn under l, then l's release.
func (l *Lease) run(ctx context.Context, fn func(ctx context.Context) error) error {
	return l.m.runHeld(ctx, held{ctx: l.Context(), err: l.Err, release: l.Release,
		subject: strconv.Quote(l.name), which: fmt.Sprintf("the lease on %q", l.name),
		logWhat: "tenure: release after Do failed; the lease expires by its TTL", logArgs: []any{"name", l.name, "fence", l.fence}}, fn)
}

// held is what Do and DoAll hold while fn runs: a lease or a Set.
type held struct {
	ctx     context.Context // ends when the hold does
	err     func() error    // nil while held, then why it ended
	release func(context.Context) error
	subject string // for "lease: SUBJECT ended before the work returned"
	which   string // for "(and WHICH ended before it returned)"
	logWhat string // the warning when the release fails
	logArgs []any
}

// runHeld runs fn with a context that ends with h or ctx, then releases
// h, bounded by the op timeout even when ctx has ended, and returns fn's
// error, or says that the hold ended before fn returned (wrapping ErrLost
// when it was lost, or found lost by the release: fn may have run beside
// another holder).
func (m *Manager) runHeld(ctx context.Context, h held, fn func(ctx context.Context) error) (err error) {
	fnCtx, cancel := context.WithCancelCause(h.ctx)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer func() {
		stop()
		cancel(nil)
		ended := h.err()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.opTimeout)
		defer rcancel()
		rerr := h.release(rctx)
		switch {
		case ended != nil:
		case errors.Is(rerr, ErrLost):
			// Deleted or taken over since the last renewal: fn may have
			// run beside another holder.
			ended = ErrLost
		case rerr != nil:
			// The work is done; a failed release only leaves the name
			// blocked until its TTL runs out.
			m.cfg.logger.Warn(h.logWhat, append(h.logArgs, "error", rerr)...)
		}
		if ended != nil {
			switch {
			case err != nil && errors.Is(err, ended):
				// fn returned why its context ended (context.Cause(ctx)),
				// or wrapped it: it says the loss already. fn's error is
				// kept, said once, with the hold named when it is the
				// cause itself.
				if err == ended {
					err = fmt.Errorf("lease: %s ended before the work returned: %w", h.subject, bare(ended))
				}
			case err != nil:
				err = fmt.Errorf("%w (and %s ended before it returned: %w)", err, h.which, ended)
			default:
				err = fmt.Errorf("lease: %s ended before the work returned: %w", h.subject, bare(ended))
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
	m.bg.close()
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

	err := m.releaseAll(items)
	// An attempt still in flight sees the manager closed when it returns,
	// and hands its lease to a clean-up round trip.
	m.bg.wait()
	if c, ok := m.be.(interface{ Close() }); ok {
		c.Close() // quorum mode: requests to slow nodes still running
	}
	if m.notify != nil {
		m.notify.close()
	}
	close(m.stopReport)
	<-m.reported
	return err
}

// closeBatch is how many leases Close releases in one pipelined round trip.
const closeBatch = 1000

// releaseAll releases items for Close, a batch a round trip, each bounded
// by the op timeout: a process holding a million leases takes seconds to
// free them all, which one bound for the lot would cut short. When a round
// trip fails (the server is down or paused), the rest are left to expire
// by their TTL rather than waited on a batch at a time. The error counts
// the leases not released and gives the first failure.
func (m *Manager) releaseAll(items []backend.Item) error {
	var (
		failed int
		first  error
	)
	total := len(items)
	res := make([]error, min(closeBatch, len(items)))
	for len(items) > 0 {
		n := min(closeBatch, len(items))
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.opTimeout)
		m.be.Release(ctx, items[:n], res[:n])
		cancel()
		unanswered := false
		for i, err := range res[:n] {
			if err != nil && !errors.Is(err, backend.ErrNotHeld) {
				failed++
				if first == nil {
					first = fmt.Errorf("release %q: %w", items[i].Name, err)
				}
				unanswered = unanswered || backend.MaybeApplied(err)
			}
		}
		items = items[n:]
		if unanswered && len(items) > 0 {
			failed += len(items) // not sent: they expire by their TTL
			break
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("lease: close: %d of %d leases not released (they expire by their TTL); the first: %w", failed, total, first)
}

// token returns a new lease token: random (newToken), followed by the
// manager's holder identity when it has one (WithHolder), and the
// acquisition's metadata when it has some (WithMetadata).
func (m *Manager) token(a acquireConfig) string {
	t := newToken()
	if m.cfg.holder != "" {
		t += holderSep + m.cfg.holder
	}
	if a.metadata != "" {
		t += metadataSep + a.metadata
	}
	return t
}

// newToken returns 128 random bits from crypto/rand, hex-encoded.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
