// Package semaphore provides counting semaphores on Redis, built on package
// lease: at most n holders of a name at once, each holding a permit with
// the contract of a lease.
//
// A permit is a *lease.Lease. It has a random token and a fencing token;
// the manager's watchdog renews it, batched with the manager's leases; its
// context is cancelled with lease.ErrLost before the server could count it
// free, even when Redis is unreachable; Release, Extend, Exec and Done
// behave as for any lease. A holder that dies stops renewing, and its
// permit frees itself when its TTL runs out: permits are never lost for
// good.
//
//	permits := semaphore.New(m)
//	p, err := permits.Acquire(ctx, "report-builders", 3) // at most 3 at once
//	if err != nil {
//		return err
//	}
//	defer p.Release(context.Background())
//	return build(p.Context())
//
// # The number of permits
//
// n is given on every call, not stored: each request is granted a permit
// only while fewer than its own n are held. Raising n lets waiters in at
// once (for those that ask with the new n). Lowering n strands nobody:
// holders above the new n keep their permits until they release or lose
// them, and requests with the new n wait until fewer than it are held.
// Requests with different n on one name are each judged by their own.
//
// # Waiting and fairness
//
// Acquire waits as lease.Manager.Acquire does: woken by the release message
// that every permit's release publishes, never sleeping past the earliest
// permit's expiry or the backoff step (lease.WithBackOff). A waiter that
// wins a permit passes the wake-up on to the next waiter of its manager,
// since another permit may be free too. With lease.WithFair(true) permits
// go in the order requests first asked: the request at place k of the queue
// is granted one only while fewer than n-k are held. A barging request
// (the default) waits while anyone waits in the fair queue, as a barging
// lease does.
//
// # On the server
//
// The permits are the name's key (the one a lease of the name would use:
// one name is one lock, so a lease or a reentrant lock of the name and its
// permits exclude each other), a sorted set of permit tokens scored by
// when each expires in the server's clock, and a hash of each permit's
// fence beside it; both live as long as the longest-lived permit. Fences
// increase across every permit, lease and reentrant lock of the name
// (docs/design.md, S5): with a semaphore they order the holders of the
// name in time, not one holder against the next of the same permit.
//
// Every key of a name shares its hash tag, so semaphores work on Redis
// Cluster. Quorum (Redlock) managers refuse them with an error wrapping
// errors.ErrUnsupported: a count kept on a majority of servers that do not
// coordinate cannot promise at most n holders.
package semaphore

import (
	"context"
	"fmt"

	"github.com/tenure-go/tenure/internal/bridge"
	"github.com/tenure-go/tenure/lease"
)

// inside reaches the part of lease that permits need and lease does not
// export.
var inside = bridge.Get[*lease.Manager, *lease.Lease, lease.AcquireOption]()

// Permits takes permits of semaphores through a lease.Manager, sharing its
// watchdog, its pub/sub connection and its key prefix. It keeps no state of
// its own and is safe for concurrent use.
type Permits struct {
	m *lease.Manager
}

// New returns Permits over m. Closing m releases the permits it holds.
func New(m *lease.Manager) *Permits {
	return &Permits{m: m}
}

// Acquire waits until it holds one of the n permits of the semaphore
// called name, or ctx ends, as lease.Manager.Acquire waits for a lease.
// ctx bounds the wait only. opts are the options of an acquisition
// (lease.WithTTL, lease.WithFair, ...). n must be at least 1; it is an
// error wrapping lease.ErrInvalidOption otherwise.
func (p *Permits) Acquire(ctx context.Context, name string, n int, opts ...lease.AcquireOption) (*lease.Lease, error) {
	if p == nil || p.m == nil {
		return nil, errNoManager
	}
	return inside.Permit(ctx, p.m, name, n, true, opts)
}

// TryAcquire makes one attempt: it returns an error wrapping
// lease.ErrNotAcquired at once if n permits of name are held, or the name
// is held by a lease or a reentrant lock, or fair waiters wait for it.
func (p *Permits) TryAcquire(ctx context.Context, name string, n int, opts ...lease.AcquireOption) (*lease.Lease, error) {
	if p == nil || p.m == nil {
		return nil, errNoManager
	}
	return inside.Permit(ctx, p.m, name, n, false, opts)
}

// Do holds a permit of name while fn runs, as lease.Manager.Do holds a
// lease: it acquires one (waiting as Acquire), runs fn with a context
// cancelled when ctx ends or the permit is lost, and releases the permit
// when fn returns, even if fn panics. It returns fn's error; when the permit
// ended before fn returned, or its release found it gone, the error also
// wraps lease.ErrLost (or lease.ErrClosed), even if fn returned nil.
func (p *Permits) Do(ctx context.Context, name string, n int, fn func(ctx context.Context) error, opts ...lease.AcquireOption) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", lease.ErrInvalidOption)
	}
	l, err := p.Acquire(ctx, name, n, opts...)
	if err != nil {
		return err
	}
	return inside.Run(ctx, l, fn)
}

var errNoManager = fmt.Errorf("%w: semaphore: Permits without a manager (use New)", lease.ErrInvalidOption)
