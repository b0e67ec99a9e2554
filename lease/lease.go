package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/watchdog"
)

// A Lease is a held name. Its context is cancelled when the lease ends: lost,
// released, or its manager closed. All methods are safe for concurrent use.
type Lease struct {
	m        *Manager
	name     string
	token    string
	fence    int64
	owner    string // a reentrant lock's owner; "" for a lease
	entry    *watchdog.Entry[backend.Item]
	acquired time.Time // when the acquire's reply came
	ctx      context.Context
	cancel   context.CancelCauseFunc
	values   values // ctx's parent

	// Together, so that a Lease fits the 192-byte size class: a process
	// may hold a million of them.
	explicitInterval bool
	permit           bool // a semaphore's permit (package semaphore)
	permits          int  // how many permits it holds, k (0 means 1)

	mu     sync.Mutex
	depth  int32 // a reentrant lock's entries through this lease
	err    error // why it ended; nil while held
	reason error // why the watchdog lost it (watchdog.ErrTakenOver, ErrExpired)
}

type leaseKey struct{}

// values is a lease context's parent: the values of the context given to
// Acquire (trace spans) and the lease itself (FromContext), without that
// context's cancellation. It is context.WithValue over
// context.WithoutCancel in one value that lives inside the Lease, so an
// acquire allocates neither.
type values struct {
	parent context.Context
	l      *Lease
}

func (values) Deadline() (time.Time, bool) { return time.Time{}, false }
func (values) Done() <-chan struct{}       { return nil }
func (values) Err() error                  { return nil }

func (v *values) Value(key any) any {
	if key == (leaseKey{}) {
		return v.l
	}
	return v.parent.Value(key)
}

// FromContext returns the lease whose context ctx is, or derives from: the
// way for work run by Manager.Do to learn its fencing token.
//
//	m.Do(ctx, "report", func(ctx context.Context) error {
//		l, _ := lease.FromContext(ctx)
//		return store.Write(ctx, l.Fence(), data)
//	})
//
// When leases nest (work under one lease acquires another), it returns the
// innermost. The context of a Set (Manager.AcquireAll, DoAll) carries the
// Set, not a lease: SetFromContext returns it.
func FromContext(ctx context.Context) (*Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(*Lease)
	return l, ok
}

// A nil *Lease (the result of a failed Acquire) holds nothing: its methods
// never panic, so that "defer l.Release(ctx)" written before the error
// check is harmless. Its Err, Release, Extend and Exec return errors
// wrapping ErrNotHeld, and its context is cancelled with cause ErrNotHeld.
var errNilLease = fmt.Errorf("%w: nil lease (its Acquire failed)", ErrNotHeld)

var nilLeaseCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errNilLease)
	return ctx
}()

// Name returns the name the lease holds ("" for a nil lease).
func (l *Lease) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Token returns the lease's token: 128 bits from crypto/rand, hex, followed
// by the manager's holder identity if it has one (WithHolder). It is the
// proof of ownership that release and renewal compare against.
func (l *Lease) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Holder returns the holder identity the lease was acquired with
// (WithHolder), or "" when its manager has none.
func (l *Lease) Holder() string {
	if l == nil {
		return ""
	}
	return HolderOf(l.token)
}

// holderSep separates a token's random part from the holder identity,
// and metadataSep what comes before from the metadata: a character that
// neither an identity nor metadata may hold (both are printable).
const (
	holderSep   = "."
	metadataSep = "\x1e"
)

// HolderOf returns the holder identity in a lease's token or stored value
// (what GET of its key returns): the part after the random hex, or "" when
// there is none, as for leases of a manager without WithHolder.
func HolderOf(token string) string {
	token, _, _ = strings.Cut(token, metadataSep)
	if i := strings.Index(token, holderSep); i >= 0 {
		return token[i+len(holderSep):]
	}
	return ""
}

// MetadataOf returns the metadata in a lease's token or stored value
// (WithMetadata), or "" when it has none.
func MetadataOf(token string) string {
	_, md, _ := strings.Cut(token, metadataSep)
	return md
}

// Metadata returns the metadata the lease was acquired with (WithMetadata),
// or "".
func (l *Lease) Metadata() string {
	if l == nil {
		return ""
	}
	return MetadataOf(l.token)
}

// Fence returns the fencing token of this acquisition: strictly greater
// than every fencing token handed out before for the name, even across a
// Redis restart that lost all data. A resource that may see writes from a
// holder that paused past its lease rejects those carrying a smaller fence.
func (l *Lease) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Context returns a context cancelled when the lease ends, no later than
// its local deadline; context.Cause returns ErrLost, ErrReleased or
// ErrClosed. It carries the values of the context passed to Acquire.
func (l *Lease) Context() context.Context {
	if l == nil {
		return nilLeaseCtx
	}
	return l.ctx
}

// Done is Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, then ErrLost, ErrReleased or
// ErrClosed.
func (l *Lease) Err() error {
	if l == nil {
		return errNilLease
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Deadline returns the lease's local deadline: the time by which its context
// is cancelled unless a renewal succeeds, computed as the send time of the
// last successful acquire or renewal, plus its TTL, minus the drift margin.
// The server keeps the key at least until then. The watchdog cancels the
// context a small slack before it (a twentieth of the TTL, at most 50ms),
// so that a timer that fires late on a busy machine still cancels by it.
func (l *Lease) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.entry.Deadline()
}

// Extend sets the lease's remaining TTL on the server to at least ttl (it
// never shortens it) and makes ttl the TTL of later renewals, which then run
// every ttl/3 unless an interval was chosen; the local deadline moves as for
// a renewal. An error wrapping ErrNotHeld means the lease was no longer held
// (if Extend found it taken over, the lease is lost). Any other error leaves
// it unknown whether the server applied the TTL; the local deadline does not
// move.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) (err error) {
	if l == nil {
		return errNilLease
	}
	if h := l.m.cfg.hooks; h.ExtendStart != nil || h.ExtendDone != nil {
		if h.ExtendStart != nil {
			ctx = h.ExtendStart(ctx, l, ttl)
		}
		if h.ExtendDone != nil {
			defer func() { h.ExtendDone(ctx, l, err) }()
		}
	}
	a := l.m.cfg.acquireConfig
	a.ttl, a.interval = ttl, 0
	if l.explicitInterval {
		a.interval = l.entry.Interval()
	}
	if err := l.m.cfg.check(&a); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, bare(err))
	}
	item := l.item()
	item.TTL = ttl
	sent := time.Now()
	err, _ = l.m.detach(ctx, func(ctx context.Context) error {
		errs := make([]error, 1)
		l.m.be.Renew(ctx, []backend.Item{item}, errs)
		return errs[0]
	}, nil)
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		l.takenOver(err)
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, bare(l.Err()))
	case err != nil:
		return fmt.Errorf("lease: extend %q: %w", l.name, err)
	}
	if err := l.m.wd.Extended(l.entry, sent, ttl, a.renewInterval()); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, bare(l.Err()))
	}
	return nil
}

// Release ends the lease: its context is cancelled with ErrReleased, then
// the name is deleted on the server if, and only if, this lease's token
// still holds it, and waiters are told. Releasing a lease that is no longer
// held is harmless and returns an error wrapping ErrNotHeld. When the lease
// was believed held but the release finds another token at the key, or
// none (it was deleted or taken over since the last renewal), the error
// also wraps ErrLost: the work done under it may have overlapped another
// holder's. Any other error
// means the delete's outcome is unknown: the lease is ended locally all the
// same and the key expires by its TTL.
//
// A lease lost to its local deadline (the server did not confirm a renewal
// in time) may still be on the server, for as long as the drift margin or
// for a whole TTL if a renewal was applied but its answer lost; Release then
// still deletes it, token-safely, so the name is free at once.
func (l *Lease) Release(ctx context.Context) (err error) {
	if l == nil {
		return errNilLease
	}
	if h := l.m.cfg.hooks; h.ReleaseStart != nil || h.ReleaseDone != nil {
		if h.ReleaseStart != nil {
			ctx = h.ReleaseStart(ctx, l)
		}
		if h.ReleaseDone != nil {
			defer func() { h.ReleaseDone(ctx, l, err) }()
		}
	}
	return l.release(ctx)
}

func (l *Lease) release(ctx context.Context) error {
	if reason := l.m.wd.Remove(l.entry); reason != nil {
		l.lost(reason)
	}
	if !l.end(ErrReleased) {
		if l.lostTo(watchdog.ErrExpired) {
			_, _ = l.m.releaseItem(ctx, l.item())
		}
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, bare(l.Err()))
	}
	err, left := l.m.releaseItem(ctx, l.item())
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		// The lease was believed held until now, but the server had let
		// it go: deleted, taken over between renewals, or lost with the
		// server's data. Work done meanwhile may have overlapped another
		// holder's, so this is a loss, not a mere "not held".
		l.m.reportLoss(l, errFoundGone)
		return fmt.Errorf("%w: %q: the release found it deleted or taken over: %w", ErrNotHeld, l.name, bare(ErrLost))
	case left:
		return fmt.Errorf("lease: release %q: %w (the delete goes on in the background)", l.name, err)
	case err != nil:
		return fmt.Errorf("lease: release %q: %w", l.name, err)
	}
	return nil
}

// item names the lease for the backend, to release it: a reentrant lock
// takes back its own entries and no more. The owner's count may hold
// others' entries even when the owner was made fresh for this lease: the
// owner goes out in contexts (reentrant.Lock.Context), and whoever locks
// under one enters the same count. Every entry and exit is applied once
// (the entry marks of acquire.lua and reenter.lua, the release markers,
// the take-backs of abandon.lua), so the lease's depth is its share.
func (l *Lease) item() backend.Item {
	ttl := l.entry.TTL()
	switch {
	case l.permit:
		return backend.Item{Name: l.name, Token: l.token, TTL: ttl, Permit: true, Permits: l.permits, Memory: l.m.cfg.memory}
	case l.owner == "":
		return backend.Item{Name: l.name, Token: l.token, TTL: ttl, Memory: l.m.cfg.memory}
	}
	it := backend.Item{Name: l.name, Token: l.owner, TTL: ttl, Reentrant: true, Op: l.token, Fence: l.fence}
	l.mu.Lock()
	it.Count = int(l.depth)
	l.mu.Unlock()
	return it
}

// end records why the lease ended and cancels its context, once; it reports
// whether this call ended it.
func (l *Lease) end(cause error) bool {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return false
	}
	l.err = cause
	reason := l.reason
	cancel := l.cancel // joinSet's, while the lease is a Set's member
	l.mu.Unlock()
	cancel(cause)
	m := l.m
	m.mu.Lock()
	if _, ok := m.held[l]; ok && l.owner == "" && !l.permit {
		if m.heldNames[l.name]--; m.heldNames[l.name] <= 0 {
			delete(m.heldNames, l.name)
		}
	}
	delete(m.held, l)
	m.mu.Unlock()
	if m.cfg.hooks.Ended != nil {
		info := EndInfo{Cause: cause, Held: time.Since(l.acquired)}
		if cause == ErrLost {
			info.Loss = lossReason(reason)
		}
		m.cfg.hooks.Ended(l, info)
	}
	return true
}

// joinSet makes the lease's end cancel s's context first, in the same
// call, so that whoever sees the lease's context done sees the Set's done
// already: a Set's context ends no later than its first member's. The
// Set's cause names the member ("account:2": lease: lost): of several
// names, which one ended is what its holder needs to know. It reports
// false, changing nothing, when the lease has ended already. A closure in
// place of l.cancel rather than a field: a Lease stays in its size class.
func (l *Lease) joinSet(s *Set) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	own := l.cancel
	l.cancel = func(cause error) {
		s.cancel(memberEnded(l.name, cause))
		own(cause)
	}
	return true
}

// memberEnded is a Set's cause when its member name ended with cause: it
// names the member and wraps cause, for errors.Is.
func memberEnded(name string, cause error) error {
	return fmt.Errorf("%q: %w", name, cause)
}

// lossReason classifies the reason a lease was lost: its key deleted, taken
// over, or its deadline passed with no renewal confirmed.
func lossReason(reason error) LossReason {
	switch {
	case errors.Is(reason, backend.ErrGone):
		return LossDeleted
	case errors.Is(reason, watchdog.ErrTakenOver):
		return LossTakenOver
	}
	return LossExpired
}

// lostTo reports whether the watchdog lost the lease for reason.
func (l *Lease) lostTo(reason error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == ErrLost && l.reason == reason
}

// holder is the lease as the watchdog sees it.
type holder Lease

func (h *holder) Lost(reason error) { (*Lease)(h).lost(reason) }

func (h *holder) Renewed(err error) {
	if f := h.m.cfg.hooks.Renewed; f != nil {
		f((*Lease)(h), err)
	}
}

// lost is the watchdog's loss callback.
func (l *Lease) lost(reason error) {
	if errors.Is(reason, watchdog.ErrClosed) {
		return
	}
	if broken && breakLoss(l, reason) { // tenure_broken builds only: broken_on.go
		return
	}
	l.mu.Lock()
	if l.err == nil {
		l.reason = reason
	}
	l.mu.Unlock()
	if l.end(ErrLost) {
		l.m.reportLoss(l, reason)
	}
}

// guarder is a backend that can make writes conditional on holding a name.
type guarder interface {
	Guard(ctx context.Context, it backend.Item, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Exec applies the writes fn queues on pipe atomically, and only while this
// lease holds its name: Redis runs them in one MULTI/EXEC transaction that
// WATCHes the name's key and is preceded by a check of this lease's token
// (or, for a reentrant lock, its owner). When the lease is no longer held,
// or its context has ended, Exec writes nothing and returns an error
// wrapping ErrLost (and the lease is lost). This is the safe form of "a
// transaction under a distributed lock": a holder paused past its lease
// cannot write after another took the name, as long as the data lives on
// the same Redis as the lease.
//
// fn only queues commands; their results are in the returned commands after
// Exec returns. A change to the lease's key while the transaction is
// prepared (a renewal, too) makes Redis discard it, and Exec tries again, a
// few times. If fn returns an error nothing is sent and Exec returns it.
// Any other error means it is unknown whether the writes were applied, as
// for any Redis transaction that timed out.
//
// On a Cluster the written keys must share the name's hash tag, {name}, so
// that they live in the lease key's slot: "tenure:{name}" is the lease, a key
// such as "account:{name}:balance" is in its slot. Exec is not available on
// a quorum (Redlock) manager.
func (l *Lease) Exec(ctx context.Context, fn func(pipe redis.Pipeliner) error) ([]redis.Cmder, error) {
	if l == nil {
		return nil, errNilLease
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: nil function", ErrInvalidOption)
	}
	g, ok := l.m.be.(guarder)
	if !ok {
		return nil, fmt.Errorf("lease: Exec is not supported by this manager's deployment")
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrLost, l.name, bare(err))
	}
	if !time.Now().Before(l.Deadline()) {
		// The watchdog is about to cancel it: past the local deadline the
		// key may be gone, or soon be.
		return nil, fmt.Errorf("%w: %q: its local deadline has passed", ErrLost, l.name)
	}
	item := l.item()
	var cmds []redis.Cmder
	err, _ := l.m.detach(ctx, func(ctx context.Context) (err error) {
		cmds, err = g.Guard(ctx, item, fn)
		return err
	}, nil)
	if errors.Is(err, backend.ErrNotHeld) {
		l.takenOver(err)
		return nil, fmt.Errorf("%w: %q: the lease no longer holds the name; nothing was written", ErrLost, l.name)
	}
	return cmds, err
}
