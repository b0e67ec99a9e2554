package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// A Set is several names held together: a lease on each, taken by
// Manager.AcquireAll or TryAcquireAll, all or none. Each member is a whole
// Lease (its own token, fence, renewal, hooks and spans); the Set adds one
// context, cancelled when any member ends, and one Release.
//
// Taking a Set is ordered, not atomic: the names are acquired one after
// another in a fixed order (their byte order), so two callers asking for
// overlapping sets in different orders never deadlock: whoever holds the
// smallest name they share goes first. Until the last one is taken, others
// may see some of the names held; a caller never gets a part of the set
// (what was taken is released when a later name cannot be). This holds on
// a Cluster, where names live in different slots and no script could take
// them at once, as on one server.
type Set struct {
	leases []*Lease // in acquisition order: by name
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool // while taking: the watches of those taken
}

// AcquireAll waits until it holds every one of names, or ctx ends, as
// Acquire does for one name; opts apply to each. It takes them in byte
// order, waiting for each in turn while holding those before it. It
// returns an error, having released what it took, when one cannot be
// taken (the error is that name's Acquire's, so errors.Is finds
// ErrNotAcquired when ctx ended first) or when one already taken is lost
// while it waits for another (the error wraps ErrLost). names must not be
// empty or repeat a name: that is ErrInvalidOption.
func (m *Manager) AcquireAll(ctx context.Context, names []string, opts ...AcquireOption) (*Set, error) {
	return m.acquireAll(ctx, names, opts, true)
}

// TryAcquireAll makes one attempt at each of names, in byte order, and
// returns ErrNotAcquired (naming the name found held) at the first one
// held, having released the ones before it.
func (m *Manager) TryAcquireAll(ctx context.Context, names []string, opts ...AcquireOption) (*Set, error) {
	return m.acquireAll(ctx, names, opts, false)
}

// DoAll runs fn while holding every one of names (AcquireAll), with the
// Set's context, and then releases them, as Do does for one name: the
// error is fn's, or says which lease ended before fn returned (wrapping
// ErrLost when one was lost). fn reaches the Set, and each name's fence,
// through SetFromContext:
//
//	m.DoAll(ctx, []string{"account:1", "account:2"}, func(ctx context.Context) error {
//		s, _ := lease.SetFromContext(ctx)
//		return transfer(ctx, s.Fence("account:1"), s.Fence("account:2"))
//	})
func (m *Manager) DoAll(ctx context.Context, names []string, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidOption)
	}
	s, err := m.AcquireAll(ctx, names, opts...)
	if err != nil {
		return err
	}
	return m.runHeld(ctx, held{ctx: s.Context(), err: s.Err, release: s.Release,
		subject: "a lease of the set", which: "a lease of the set",
		logWhat: "tenure: release after DoAll failed; the leases expire by their TTL", logArgs: []any{"names", s.Names()}}, fn)
}

func (m *Manager) acquireAll(ctx context.Context, names []string, opts []AcquireOption, wait bool) (*Set, error) {
	order, err := setOrder(names)
	if err != nil {
		return nil, err
	}
	// Waiting for a later name ends as soon as an earlier one is lost:
	// holding the rest would serve nobody.
	wctx, wcancel := context.WithCancelCause(ctx)
	defer wcancel(nil)
	s := &Set{}
	for _, name := range order {
		var l *Lease
		if wait {
			l, err = m.Acquire(wctx, name, opts...)
		} else {
			l, err = m.TryAcquire(wctx, name, opts...)
		}
		if err != nil {
			if cause := context.Cause(wctx); ctx.Err() == nil && errors.Is(cause, ErrLost) {
				err = cause
			}
			s.undo(ctx, m)
			return nil, err
		}
		s.leases = append(s.leases, l)
		s.stops = append(s.stops, context.AfterFunc(l.Context(), func() {
			wcancel(fmt.Errorf("lease: %q, taken for the set, ended while the rest were taken: %w", l.name, context.Cause(l.Context())))
		}))
	}
	for _, stop := range s.stops {
		stop()
	}
	s.stops = nil
	// The Set's context keeps ctx's values, not its cancellation, as a
	// Lease's does, and ends with the first member that ends: in the
	// member's own end, before the member's context (joinSet), not an
	// AfterFunc's goroutine later, so that work under the Set never runs
	// past a member's loss.
	s.ctx, s.cancel = context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), setKey{}, s))
	if broken && breakSetContext() { // tenure_broken builds only: broken_on.go
		return s, nil
	}
	for _, l := range s.leases {
		// A member lost after the last one was taken, before it joined,
		// would leave the Set's context live: give the caller no Set
		// that is already lost.
		if !l.joinSet(s) {
			err := l.Err()
			s.cancel(err)
			s.undo(ctx, m)
			return nil, fmt.Errorf("lease: %q, taken for the set, ended before the set was whole: %w", l.name, err)
		}
	}
	return s, nil
}

// setOrder returns names in the order they are taken, or ErrInvalidOption.
func setOrder(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no names", ErrInvalidOption)
	}
	order := slices.Clone(names)
	slices.Sort(order)
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			return nil, fmt.Errorf("%w: name %q given twice", ErrInvalidOption, order[i])
		}
	}
	return order, nil
}

// undo releases what a failed acquireAll took, last first, bounded by the
// manager's op timeout; a lease it cannot release expires by its TTL.
func (s *Set) undo(ctx context.Context, m *Manager) {
	for _, stop := range s.stops {
		stop()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.opTimeout)
	defer cancel()
	for i := len(s.leases) - 1; i >= 0; i-- {
		_ = s.leases[i].Release(rctx)
	}
}

type setKey struct{}

// SetFromContext returns the Set whose context ctx is, or derives from:
// the way for work run by Manager.DoAll to learn its leases and their
// fences (Set.Fence). When Sets nest it returns the innermost. A Set is
// not a Lease: FromContext does not see it (on a Set's context it returns
// a lease held further out, if any), since a Set has a lease, and a fence,
// per name.
func SetFromContext(ctx context.Context) (*Set, bool) {
	s, ok := ctx.Value(setKey{}).(*Set)
	return s, ok
}

// Leases returns the Set's leases, in the order they were taken (by name).
func (s *Set) Leases() []*Lease { return slices.Clone(s.leases) }

// Names returns the Set's names, in the order they were taken.
func (s *Set) Names() []string {
	out := make([]string, len(s.leases))
	for i, l := range s.leases {
		out[i] = l.name
	}
	return out
}

// Lease returns the Set's lease on name, or nil when name is not in it.
func (s *Set) Lease(name string) *Lease {
	for _, l := range s.leases {
		if l.name == name {
			return l
		}
	}
	return nil
}

// Fence returns the fence of the Set's lease on name (each name has its
// own counter: fences of different names are not comparable), or 0 when
// name is not in it.
func (s *Set) Fence(name string) int64 {
	if l := s.Lease(name); l != nil {
		return l.Fence()
	}
	return 0
}

// Context returns a context cancelled when the first of the Set's leases
// ends, no later than the earliest local deadline among them; its cause
// names that lease and wraps its cause (ErrLost, ErrReleased or ErrClosed),
// as in "account:2": lease: lost, so errors.Is(cause, ErrLost) tells a
// loss. Set.Release ends it with ErrReleased itself. It is done by the time
// that lease's own context is: the lease's end cancels it first.
func (s *Set) Context() context.Context { return s.ctx }

// Done is Context().Done().
func (s *Set) Done() <-chan struct{} { return s.ctx.Done() }

// Err returns nil while every lease of the Set is held, then the Set's
// context's cause: the first lease that ended, named, wrapping its cause
// ("account:2": lease: lost), or ErrReleased after Set.Release.
func (s *Set) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// Release ends the Set's context with ErrReleased, then releases every
// lease of the Set, in parallel round trips bounded by ctx, and returns
// their errors joined (each names its lease; ErrLost for one lost since its
// last renewal). Like Lease.Release, a lease is ended locally whatever the
// outcome.
func (s *Set) Release(ctx context.Context) error {
	// First, as Lease.Release ends a lease before its delete: once a key
	// is deleted another may take the name, and work under the Set must
	// have been told to stop by then.
	s.cancel(ErrReleased)
	errs := make([]error, len(s.leases))
	var wg sync.WaitGroup
	for i, l := range s.leases {
		wg.Go(func() {
			if err := l.Release(ctx); err != nil {
				errs[i] = fmt.Errorf("%q: %w", l.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
