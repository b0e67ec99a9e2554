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
// permit's lease, renewed by the watchdog. w ends with ErrReleased before
// the script is sent, whatever its outcome. When the outcome is unknown
// both the permit's request and w are taken back in the background, so
// that neither blocks the name (S7).
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
	if a.count > 0 {
		return nil, fmt.Errorf("%w: %q: a downgrade makes one read permit: no count", ErrInvalidOption, w.name)
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
	if !m.bg.enter() {
		return nil, ErrClosed
	}
	defer m.bg.leave()
	return m.downgradeHeld(ctx, be, w, a, n)
}

// downgradeHeld ends w and sends the downgrade. The write lock's context
// ends before the script is sent, as Release ends a lease before its
// delete: the server lets waiting readers in as soon as it runs the
// script, while its answer may still be on its way back, and no reader
// may enter while the writer's context is live (S1).
func (m *Manager) downgradeHeld(ctx context.Context, be downgrader, w *Lease, a acquireConfig, n int) (*Lease, error) {
	if reason := m.wd.Remove(w.entry); reason != nil {
		w.lost(reason)
	}
	if !w.end(ErrReleased) {
		return nil, fmt.Errorf("%w: %q: %w", ErrNotHeld, w.name, bare(w.Err()))
	}
	item := w.item()
	req := backend.Request{Name: w.name, Token: m.token(a), TTL: a.ttl, Limit: n}
	sent := time.Now()
	f, err := be.Downgrade(ctx, item, req)
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		// Believed held until now, but gone on the server: work done
		// under it may have overlapped another holder's, a loss (as
		// Release reports it).
		m.reportLoss(w, errFoundGone)
		return nil, fmt.Errorf("%w: %q: the downgrade found the write lock gone: %w", ErrNotHeld, w.name, bare(ErrLost))
	case err != nil:
		// Maybe applied: the writer's token may hold the name still, or
		// the permit may. Take back both.
		m.abandonLater(req)
		m.releaseLater(item)
		return nil, fmt.Errorf("lease: downgrade %q: %w (the write lock has ended)", w.name, err)
	}
	res := backend.Acquisition{Acquired: true, Fence: f}
	if time.Since(sent) >= a.ttl-m.cfg.drift(a.ttl) {
		m.releaseLater(req.Item())
		return nil, fmt.Errorf("%w: %q: the downgrade was answered too late to use its read lock", ErrNotAcquired, w.name)
	}
	l, err := m.hold(ctx, req, a, res, sent)
	if err != nil {
		return nil, err
	}
	if !m.handOver(l) {
		return nil, fmt.Errorf("%w: %q: the downgrade was answered too late to use its read lock", ErrNotAcquired, w.name)
	}
	return l, nil
}
