package main

// How "tenure run" takes NAME: the plain lease (a read-write lock's write
// lock), a read lock (--shared) or a permit (-n), at once or waiting as
// --wait says.

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
)

// acquirer is how a run takes NAME: the write lock (the plain lease), a
// read lock (--shared), or a permit (-n): one path, only the acquisition
// and the words differ, since each is a *lease.Lease.
type acquirer struct {
	take func(ctx context.Context, wait bool) (*lease.Lease, error)
	// kind is the hold's kind, for the line a hold prints.
	kind string
	// held names what is held ("the lease on "x""), busy says that NAME
	// is held, from who holds it, and acquiring names the acquisition.
	held, acquiring string
	busy            func(h holding) string
}

func newAcquirer(m *lease.Manager, name string, permits int, resize, shared, quorum bool, opts []lease.AcquireOption) acquirer {
	switch {
	case permits > 0:
		return permitAcquirer(m, name, permits, resize, opts)
	case shared:
		rw := rwlock.New(m)
		return acquirer{
			take: func(ctx context.Context, wait bool) (*lease.Lease, error) {
				if wait {
					return rw.RLock(ctx, name, opts...)
				}
				return rw.TryRLock(ctx, name, opts...)
			},
			kind:      "read lock",
			held:      fmt.Sprintf("the read lock of %q", name),
			acquiring: fmt.Sprintf("acquiring a read lock of %q (--shared)", name),
			busy:      func(h holding) string { return readerBusy(name, h) },
		}
	}
	take := func(ctx context.Context, wait bool) (*lease.Lease, error) {
		if wait {
			return rwlock.New(m).Lock(ctx, name, opts...)
		}
		return rwlock.New(m).TryLock(ctx, name, opts...)
	}
	if quorum {
		// Quorum mode keeps no fair queue, which a writer waits in, and
		// no read locks: a plain lease is the write lock's key alike.
		take = func(ctx context.Context, wait bool) (*lease.Lease, error) {
			if wait {
				return m.Acquire(ctx, name, opts...)
			}
			return m.TryAcquire(ctx, name, opts...)
		}
	}
	return acquirer{
		take:      take,
		kind:      "lease",
		held:      fmt.Sprintf("the lease on %q", name),
		acquiring: fmt.Sprintf("acquiring %q", name),
		busy:      func(h holding) string { return fmt.Sprintf("%q is held by %s", name, h.who()) },
	}
}

// permitAcquirer takes one of the permits of the semaphore name (-n).
func permitAcquirer(m *lease.Manager, name string, permits int, resize bool, opts []lease.AcquireOption) acquirer {
	sem := semaphore.New(m)
	return acquirer{
		take: func(ctx context.Context, wait bool) (*lease.Lease, error) {
			o := append(opts[:len(opts):len(opts)], semaphore.WithResize(resize))
			if wait {
				// A waiting run takes its turn in the name's fair queue:
				// the runs get in in the order they asked, and status
				// counts them as waiting, which barging waiters (unknown
				// to the server) it could not.
				return sem.Acquire(ctx, name, permits, append(o, lease.WithFair(true))...)
			}
			return sem.TryAcquire(ctx, name, permits, o...)
		},
		kind:      "permit",
		held:      fmt.Sprintf("the permit of %q", name),
		acquiring: fmt.Sprintf("acquiring a permit of %q (-n %d)", name, permits),
		busy: func(holding) string {
			return fmt.Sprintf("%q has all %d permits held (or a lease or lock holds it)", name, permits)
		},
	}
}

// readerBusy says why a read lock (--shared) of name waits, from h: a
// sentence that names who holds the name and who waits for it. Readers
// never pass a waiting writer (writers first), so readers holding the
// name keep a new reader out only while a writer waits behind them.
func readerBusy(name string, h holding) string {
	switch {
	case h.Kind == "lease":
		return fmt.Sprintf("a writer holds %q: %s", name, h.who())
	case h.Kind == "permits" && h.Waiting > 0:
		writers := "a writer waits"
		if h.Waiting > 1 {
			writers = fmt.Sprintf("%d writers wait", h.Waiting)
		}
		return fmt.Sprintf("%s for %q, held by %s; a new reader waits behind the writers (writers first), "+
			"until they have come and gone", writers, name, h.who())
	}
	return fmt.Sprintf("%q is held by %s", name, h.who())
}

// acquire takes NAME as --wait says: one attempt first, then, if NAME is
// held and --wait allows, a wait announced once on stderr with who holds
// NAME. wctx is the --wait's context (ctx itself for forever, and for
// --wait 0, whose one attempt it does not bound).
func (r *runner) acquire(ctx, wctx context.Context) (*lease.Lease, error) {
	l, err := r.how.take(wctx, false)
	if errors.Is(err, lease.ErrNotAcquired) && (r.o.wait.forever || r.o.wait.d > 0) {
		fmt.Fprintf(r.stderr, "tenure: %s; waiting for it (--wait %v)\n", r.how.busy(r.whoHolds(ctx)), r.o.wait.String())
		// A Redis that fails while we wait (a restart, a failover) is
		// waited out too, within --wait.
		l, err = r.g.retrying(wctx, r.how.take)
	}
	if err == nil {
		return l, nil
	}
	if s, ok := r.sigs.interrupted(); ok {
		return nil, fail(signalStatus(s), "interrupted by %s while waiting for %q", signalName(s), r.name)
	}
	if le := (*semaphore.LimitError)(nil); errors.As(err, &le) {
		return nil, fail(exitLimit, "%v: run with -n %d, or add --resize to make it %d", err, le.Held, le.Wanted)
	}
	if errors.Is(err, lease.ErrNotAcquired) {
		return nil, fail(r.o.heldExit, "%s; not acquired within --wait %v", r.how.busy(r.whoHolds(context.Background())), r.o.wait.String())
	}
	return nil, r.g.redisFailure(r.how.acquiring, err)
}
