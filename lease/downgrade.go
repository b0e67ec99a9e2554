package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
)

// downgrader is a backend that can turn a writer's lease into a read
// permit in one step (package rwlock's Downgrade).
type downgrader interface {
	Downgrade(ctx context.Context, w backend.Item, req backend.Request) (int64, error)
}

// downgrade replaces the lease w, a plain lease of m, with one permit of
// the semaphore of n permits of w's name, in one script, and returns the
// permit's lease, renewed by the watchdog. w ends with ErrReleased. When
// the outcome is unknown w ends with ErrLost, and both the permit's
// request and w are taken back in the background, so that neither blocks
// the name (S7).
func (m *Manager) downgrade(ctx context.Context, w *Lease, n int, opts []AcquireOption) (l *Lease, err error) {
	switch {
	case w == nil:
		return nil, errNilLease
	case w.m != m:
		return nil, fmt.Errorf("%w: %q: the lease is another manager's", ErrInvalidOption, w.name)
	case w.permit || w.owner != "":
		return nil, fmt.Errorf("%w: %q: only a plain lease (a writer's) is downgraded", ErrInvalidOption, w.name)
	}
	be, ok := m.be.(downgrader)
	if !ok || m.quorum {
		return nil, fmt.Errorf("lease: downgrade on this manager's backend: %w", errors.ErrUnsupported)
	}
	a, err := m.acquireConfig(w.name, opts)
	if err != nil {
		return nil, err
	}
	a.holding = holding{limit: n}
	if h := m.cfg.hooks; h.AcquireStart != nil || h.AcquireDone != nil {
		if h.AcquireStart != nil {
			ctx = h.AcquireStart(ctx, w.name)
		}
		if h.AcquireDone != nil {
			start := time.Now()
			defer func() {
				h.AcquireDone(ctx, AcquireInfo{Name: w.name, Lease: l, Attempts: 1, Waited: time.Since(start), Err: err})
			}()
		}
	}
	if err := w.Err(); err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrNotHeld, w.name, bare(err))
	}
	if !m.bg.enter() {
		return nil, ErrClosed
	}
	defer m.bg.leave()
	req := backend.Request{Name: w.name, Token: m.token(a), TTL: a.ttl, Limit: n}
	sent := time.Now()
	f, err := be.Downgrade(ctx, w.item(), req)
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		w.takenOver(err)
		return nil, fmt.Errorf("%w: %q: the downgrade found the write lock gone: %w", ErrNotHeld, w.name, bare(ErrLost))
	case err != nil:
		// Maybe applied: the writer's token may hold the name still, or
		// the permit may. End the writer's lease now (S1) and take back
		// both.
		if m.wd.Remove(w.entry) == nil {
			w.end(ErrLost)
		}
		m.abandonLater(req)
		m.releaseLater(w.item())
		return nil, fmt.Errorf("lease: downgrade %q: %w (the write lock has ended)", w.name, err)
	}
	// The writer's token no longer holds the name: its lease ends,
	// released, and the permit's begins.
	if reason := m.wd.Remove(w.entry); reason != nil {
		w.lost(reason)
	}
	w.end(ErrReleased)
	res := backend.Acquisition{Acquired: true, Fence: f}
	if time.Since(sent) >= a.ttl-m.cfg.drift(a.ttl) {
		m.releaseLater(req.Item())
		return nil, fmt.Errorf("%w: %q: the downgrade was answered too late to use its read lock", ErrNotAcquired, w.name)
	}
	if l, err = m.hold(ctx, req, a, res, sent); err != nil {
		return nil, err
	}
	if !m.handOver(l) {
		return nil, fmt.Errorf("%w: %q: the downgrade was answered too late to use its read lock", ErrNotAcquired, w.name)
	}
	return l, nil
}
