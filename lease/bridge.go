package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/bridge"
	"github.com/tenure-go/tenure/watchdog"
)

// Package reentrant builds reentrant locks on leases whose key is a hash of
// owner -> count, and package semaphore permits on leases whose key is a
// sorted set of permits (docs/design.md section 3); these are the parts of
// lease they need.
func init() {
	bridge.Set(bridge.Bridge[*Manager, *Lease, AcquireOption]{
		Acquire: func(ctx context.Context, m *Manager, name, owner string, wait bool, opts []AcquireOption) (*Lease, error) {
			if owner == "" {
				return nil, fmt.Errorf("%w: empty owner", ErrInvalidOption)
			}
			return m.acquire(ctx, name, opts, wait, holding{owner: owner})
		},
		Permit: func(ctx context.Context, m *Manager, name string, n, k int, wait bool, opts []AcquireOption) (*Lease, error) {
			if n < 1 {
				return nil, fmt.Errorf("%w: %d permits: a semaphore has at least 1", ErrInvalidOption, n)
			}
			if k < 0 || k > n {
				return nil, fmt.Errorf("%w: %d of %d permits at once: from 1 to n", ErrInvalidOption, k, n)
			}
			if broken { // tenure_broken builds only: broken_on.go
				n = breakLimit(n)
			}
			// k, 0 when not given, is settled with semaphore.WithCount's
			// by permitCount.
			return m.acquire(ctx, name, opts, wait, holding{limit: n, permits: k})
		},
		Available: available,
		Downgrade: func(ctx context.Context, m *Manager, w *Lease, n int, opts []AcquireOption) (*Lease, error) {
			return m.downgrade(ctx, w, n, opts)
		},
		Resize: func(on bool) AcquireOption { return resizeOption(on) },
		Count:  func(k int) AcquireOption { return countOption(k) },
		Run:    func(ctx context.Context, l *Lease, fn func(context.Context) error) error { return l.run(ctx, fn) },
		Holds: func(m *Manager, l *Lease) (bool, bool) {
			return l != nil && l.m == m && l.Err() == nil, l != nil && l.permit
		},
		Enter: func(ctx context.Context, l *Lease) (int64, error) { return l.enter(ctx) },
		Client: func(m *Manager) redis.UniversalClient {
			if m == nil {
				return nil
			}
			return m.client
		},
		Exit:      func(ctx context.Context, l *Lease) error { return l.exit(ctx) },
		OnBackend: onBackend,
	})
}

// available is semaphore.Permits.Available: the free permits of name's
// semaphore of n, read alone.
func available(ctx context.Context, m *Manager, name string, n int) (int, int, error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("%w: %d permits: a semaphore has at least 1", ErrInvalidOption, n)
	}
	if err := checkName(name); err != nil {
		return 0, 0, err
	}
	a, ok := m.be.(interface {
		Available(ctx context.Context, name string, n int) (int, int, error)
	})
	if !ok || m.quorum {
		return 0, 0, fmt.Errorf("lease: semaphores on this manager's backend: %w", errors.ErrUnsupported)
	}
	if !m.bg.enter() {
		return 0, 0, ErrClosed
	}
	defer m.bg.leave()
	return a.Available(ctx, name, n)
}

// onBackend is a Manager over a backend of package internal/backend
// (leasetest's in-memory server).
func onBackend(be any, opts []any) (*Manager, error) {
	b, ok := be.(backend.Backend)
	if !ok {
		return nil, fmt.Errorf("%w: %T is no backend", ErrInvalidOption, be)
	}
	os := make([]Option, len(opts))
	for i, o := range opts {
		if os[i], ok = o.(Option); !ok {
			return nil, fmt.Errorf("%w: %T is no lease.Option", ErrInvalidOption, o)
		}
	}
	cfg, err := buildConfig(os)
	if err != nil {
		return nil, err
	}
	if f, ok := b.(*backend.Fake); ok {
		// A Redis client ends a command the server does not answer at its
		// read timeout, whatever the context: the in-memory server's
		// client ends it at the op timeout, or an unreachable server would
		// hold Release(context.Background()) for ever, and a test under
		// testing/synctest would never end.
		b = f.WithTimeout(cfg.opTimeout)
	}
	return newManager(b, cfg), nil
}

// enter adds an entry to the reentrant lock l holds.
func (l *Lease) enter(ctx context.Context) (int64, error) {
	if err := l.Err(); err != nil {
		return 0, fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, bare(err))
	}
	item := l.item()
	item.TTL = l.entry.TTL()
	item.Op = newToken()
	var n int64
	err, left := l.m.detach(ctx, func(ctx context.Context) (err error) {
		n, err = l.m.be.Reenter(ctx, item)
		return err
	}, func(err error) {
		// The caller left: an entry made now is nobody's.
		if err == nil || unsettled(err) {
			l.m.bg.child(func() { l.m.takeBack(item) })
		}
	})
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		l.takenOver(err)
		return 0, fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, bare(l.Err()))
	case err != nil:
		if !left && unsettled(err) {
			l.m.bg.spawn(func() { l.m.takeBack(item) })
		}
		return 0, fmt.Errorf("lease: enter %q again: %w", l.name, err)
	}
	l.mu.Lock()
	l.depth++
	l.mu.Unlock()
	return n, nil
}

// exit takes back one of several entries of the reentrant lock l holds.
func (l *Lease) exit(ctx context.Context) error {
	l.mu.Lock()
	if l.depth <= 1 {
		l.mu.Unlock()
		return errors.New("lease: exit of a reentrant lock's last entry; release it instead")
	}
	l.depth--
	l.mu.Unlock()
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, bare(err))
	}
	item := backend.Item{Name: l.name, Token: l.owner, Reentrant: true, Count: 1, Op: newToken(), Fence: l.fence}
	var err error
	if l.m.direct(ctx) {
		err = l.m.releaseNow(ctx, item)
	} else {
		var left bool
		err, left = l.m.detach(ctx, l.m.releaseOp(item), func(err error) {
			if unsettled(err) {
				l.m.bg.child(func() { l.m.cleanUp("resending an unanswered exit", l.name, l.m.releaseOp(item)) })
			}
		})
		if left {
			return fmt.Errorf("lease: exit %q: %w (it goes on in the background)", l.name, err)
		}
	}
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		l.takenOver(err)
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, bare(l.Err()))
	case err != nil:
		// The exit is counted already (the depth went down): it is sent
		// once more in the background, under the same op, so that one lost
		// on its way still lands; release.lua's marker makes the copy of an
		// exit that was applied do nothing.
		if unsettled(err) {
			l.m.bg.spawn(func() { l.m.cleanUp("resending an unanswered exit", l.name, l.m.releaseOp(item)) })
		}
		return fmt.Errorf("lease: exit %q: %w", l.name, err)
	}
	return nil
}

// unsettled reports whether err leaves it unknown if a reentrant entry or
// exit was applied.
func unsettled(err error) bool {
	return err != nil && !errors.Is(err, backend.ErrNotHeld) && backend.MaybeApplied(err)
}

// takeBack takes back a re-entry (item, under its op) whose outcome is
// unknown or that nobody will use: abandon.lua undoes its one entry if its
// mark says it was applied, and refuses it should it still come.
func (m *Manager) takeBack(item backend.Item) {
	req := backend.Request{Name: item.Name, Token: item.Op, TTL: item.TTL, Owner: item.Token}
	m.cleanUp("taking back an unanswered re-entry", item.Name, m.abandonOp(req))
}

// takenOver loses the lease because a round trip of its own found it gone.
func (l *Lease) takenOver(err error) {
	reason := watchdog.ErrTakenOver
	if errors.Is(err, backend.ErrGone) {
		reason = errExtendGone
	}
	if l.m.wd.Remove(l.entry) == nil {
		l.lost(reason)
	}
}

// errExtendGone is the loss reason of an Extend that found the key gone.
var errExtendGone = fmt.Errorf("%w: %w", watchdog.ErrTakenOver, backend.ErrGone)
