package lease

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ctxBound reports whether client ends a command when its context ends
// (go-redis's ContextTimeoutEnabled). Without it, go-redis waits out a
// stalled command for its ReadTimeout whatever the context says.
func ctxBound(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// detach runs op so that the caller is bounded by ctx even when the client
// is not: if ctx ends first, detach returns at once with ctx's cause and
// left set, while op runs to its end in a goroutine that Close waits for,
// and then hands its error to late (if not nil), which may clean up after a
// caller that is gone. With a client that honours contexts, or a ctx that
// cannot end, op simply runs.
//
// A detached op keeps ctx's values but not its end: a delete the caller
// gave up waiting for should still happen. It is bounded instead by the op
// timeout from the moment the caller left.
func (m *Manager) detach(ctx context.Context, op func(context.Context) error, late func(error)) (err error, left bool) {
	if m.direct(ctx) || !m.bg.enter() {
		return op(ctx), false
	}
	var (
		mu       sync.Mutex
		finished bool
		orphan   *time.Timer // ends an op whose caller left, after the op timeout
		result   error
	)
	opCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer m.bg.leave()
		err := op(opCtx)
		mu.Lock()
		finished, result = true, err
		abandoned := orphan != nil
		if abandoned {
			orphan.Stop()
		}
		mu.Unlock()
		cancel()
		close(done)
		if abandoned && late != nil {
			late(err)
		}
	}()
	select {
	case <-done:
		return result, false
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return result, false
		}
		orphan = time.AfterFunc(m.cfg.opTimeout, cancel)
		return context.Cause(ctx), true
	}
}

// direct reports whether a round trip under ctx may simply run: the client
// ends it when ctx ends, or ctx never ends.
func (m *Manager) direct(ctx context.Context) bool { return m.ctxBound || ctx.Done() == nil }
