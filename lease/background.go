package lease

import (
	"context"
	"errors"
	"sync"

	"github.com/tenure-go/tenure/internal/backend"
)

// background owns the work a Manager does that no caller sees to its end:
// acquire attempts in flight (whose outcome may call for a clean-up after
// their caller left), round trips a caller stopped waiting for (detach),
// and clean-ups (releasing a lease nobody will use, abandoning an
// unanswered acquire, leaving the fair queue). Close stops it taking new
// work, then waits for all of it.
//
// Work already counted may start more (a clean-up after an attempt) even
// after Close began: it holds a count itself, so the count cannot reach
// zero, and Close cannot stop waiting, before the new work is counted.
type background struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter counts one piece of work, unless Close began.
func (b *background) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

// leave ends a piece of work that enter counted.
func (b *background) leave() { b.wg.Done() }

// spawn runs f in a goroutine that Close waits for, unless Close began.
func (b *background) spawn(f func()) bool {
	if !b.enter() {
		return false
	}
	go func() {
		defer b.leave()
		f()
	}()
	return true
}

// child runs f in a goroutine that Close waits for. The caller must be
// counted work itself (between enter and leave), which is what lets it
// start work after Close began.
func (b *background) child(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.leave()
		f()
	}()
}

// close refuses new work from now on.
func (b *background) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}

// wait waits for all the work counted; call it after close.
func (b *background) wait() { b.wg.Wait() }

// cleanUp makes a best-effort round trip, bounded by the op timeout, that
// no caller waits for: a failure only leaves a key to expire by its TTL.
func (m *Manager) cleanUp(what, name string, op func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.opTimeout)
	defer cancel()
	if err := op(ctx); err != nil && !errors.Is(err, backend.ErrNotHeld) {
		m.cfg.logger.Debug("tenure: "+what+" failed; the key expires by its TTL", "name", name, "error", err)
	}
}

// abandonOp takes back an acquire whose outcome is unknown (S7).
func (m *Manager) abandonOp(req backend.Request) func(ctx context.Context) error {
	return func(ctx context.Context) error { return m.be.Abandon(ctx, req) }
}

// releaseOp releases a lease nobody will use.
func (m *Manager) releaseOp(item backend.Item) func(ctx context.Context) error {
	return func(ctx context.Context) error { return m.releaseNow(ctx, item) }
}

// releaseNow releases one item.
func (m *Manager) releaseNow(ctx context.Context, item backend.Item) error {
	return backend.ReleaseOne(ctx, m.be, item)
}

// releaseItem releases item for a caller bounded by ctx (see detach),
// with no closure in the common case.
func (m *Manager) releaseItem(ctx context.Context, item backend.Item) (err error, left bool) {
	if m.direct(ctx) {
		return m.releaseNow(ctx, item), false
	}
	return m.detach(ctx, m.releaseOp(item), nil)
}

// releaseLater releases, in the background, a lease nobody will use. The
// caller is counted work (an attempt).
func (m *Manager) releaseLater(item backend.Item) {
	m.bg.child(func() { m.cleanUp("clean-up release", item.Name, m.releaseOp(item)) })
}

// abandonLater takes back, in the background, an acquire whose outcome is
// unknown (S7). The caller is counted work (an attempt).
func (m *Manager) abandonLater(req backend.Request) {
	m.bg.child(func() { m.cleanUp("abandoning an unanswered acquire", req.Name, m.abandonOp(req)) })
}

// leaveLater takes a fair waiter that gives up out of the queue, in the
// background: otherwise the others would wait behind it until the queue
// forgets it. After Close began it does nothing: the queue forgets the
// waiter soon enough.
func (m *Manager) leaveLater(req backend.Request) {
	m.bg.spawn(func() { m.cleanUp("leaving the queue", req.Name, m.leaveOp(req)) })
}

// leaveOp takes req's token out of the name's fair queue.
func (m *Manager) leaveOp(req backend.Request) func(context.Context) error {
	return func(ctx context.Context) error { return m.be.Leave(ctx, req) }
}
