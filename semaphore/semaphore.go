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
// n is given on every call, and the n of the request that took the first
// permit stands while any permit of the name is held: it is stored with
// the permits and goes with the last of them (released, or expired). A
// request with another n fails at once, without waiting, with a
// *LimitError that matches ErrLimitMismatch and says both numbers: two
// configurations that disagree on n would otherwise let more holders in
// than either meant. Once no permit is held the next request to take one
// sets n anew, whatever it was before; a waiter that asked while permits
// were held under its n, and finds them held under another when it asks
// again (the set emptied and was taken anew), fails likewise.
//
// To change n while permits are held, ask with WithResize(true): the
// request stores its n and is then judged by it, as every request after it
// is. Raising n lets more in at once. Lowering it strands nobody and
// revokes nothing: holders above the new n keep their permits until they
// release or lose them, and no request is granted one until fewer than
// the new n are held. A resizing request stores its n at each attempt, so
// of two that disagree, the latest attempt stands.
//
// # Several permits at once
//
// Acquire with WithCount(k) (or AcquireN and TryAcquireN, which take k
// beside n) takes k of the n permits in one request, all or none, as one
// lease: its release frees all k, its renewal renews all k, and its loss
// is one loss. Available reads how many permits are free without taking
// any.
//
//	p, err := permits.Acquire(ctx, "pool", 3, semaphore.WithCount(2)) // 2 of 3
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
// lease does. A request for k permits waits in the fair queue as k
// requests for one would, so those behind it leave it room; barging, it
// gets in only when it finds k free at once.
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
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/internal/bridge"
	"github.com/tenure-go/tenure/lease"
)

// inside reaches the part of lease that permits need and lease does not
// export.
var inside = bridge.Get[*lease.Manager, *lease.Lease, lease.AcquireOption]()

// ErrLimitMismatch is matched (errors.Is) by the error of a request
// refused because the name's permits are held under another n: a
// *LimitError.
var ErrLimitMismatch = errors.New("semaphore: permits are held under another n")

// LimitError is the error of a request whose n differs from the n that the
// name's permits are held under, and which did not ask to resize
// (WithResize): it fails at once, without waiting. It matches
// ErrLimitMismatch; it does not match lease.ErrNotAcquired, since waiting
// or trying again with the same n does not help while permits are held.
type LimitError struct {
	// Name is the semaphore's name.
	Name string
	// Held is the n the permits are held under, Wanted the request's.
	Held, Wanted int
}

// Error says both numbers: "semaphore NAME has n=2 while its permits are
// held; this request asked n=3".
func (e *LimitError) Error() string {
	return fmt.Sprintf("semaphore %q has n=%d while its permits are held; this request asked n=%d", e.Name, e.Held, e.Wanted)
}

// Is reports whether target is ErrLimitMismatch.
func (e *LimitError) Is(target error) bool { return target == ErrLimitMismatch }

// WithResize(true) lets a request change the semaphore's n: while the
// name's permits are held under another n, the request stores its own
// instead of failing with ErrLimitMismatch, and is then judged by it, as
// every request after it is. Held permits are never revoked: when n goes
// down, holders above it keep their permits until they let go, and no
// request is granted one until fewer than the new n are held. With no
// permit held it changes nothing: the request that takes the first permit
// sets n anyway. It is an option of Permits' methods only; a lease's
// Acquire refuses it (lease.ErrInvalidOption).
func WithResize(on bool) lease.AcquireOption { return inside.Resize(on) }

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

// WithCount(k) makes a request take k of the semaphore's n permits at
// once, all or none, as one lease (see AcquireN): it reads unambiguously
// where AcquireN's two numbers side by side do not,
//
//	p, err := permits.Acquire(ctx, "pool", 3, semaphore.WithCount(2)) // 2 of 3
//
// k must be from 1 to n (an error wrapping lease.ErrInvalidOption
// otherwise), and agree with AcquireN's or TryAcquireN's k when given to
// them. It is an option of Permits' methods only; a lease's Acquire
// refuses it (lease.ErrInvalidOption).
func WithCount(k int) lease.AcquireOption { return inside.Count(k) }

// Acquire waits until it holds one of the n permits of the semaphore
// called name (k of them with WithCount(k)), or ctx ends, as
// lease.Manager.Acquire waits for a lease. ctx bounds the wait only. opts
// are the options of an acquisition (lease.WithTTL, lease.WithFair,
// WithResize, WithCount, ...). n must be at least 1; it is an error
// wrapping lease.ErrInvalidOption otherwise. While the name's permits are
// held under another n, Acquire fails at once with a *LimitError
// (ErrLimitMismatch), unless opts has WithResize(true).
func (p *Permits) Acquire(ctx context.Context, name string, n int, opts ...lease.AcquireOption) (*lease.Lease, error) {
	if p == nil || p.m == nil {
		return nil, errNoManager
	}
	return limitError(inside.Permit(ctx, p.m, name, n, 0, true, opts))
}

// TryAcquire makes one attempt: it returns an error wrapping
// lease.ErrNotAcquired at once if no permit of name is free (fewer than
// k with WithCount(k)), or the name
// is held by a lease or a reentrant lock, or fair waiters wait for it; and
// a *LimitError, as Acquire, if the permits are held under another n.
func (p *Permits) TryAcquire(ctx context.Context, name string, n int, opts ...lease.AcquireOption) (*lease.Lease, error) {
	if p == nil || p.m == nil {
		return nil, errNoManager
	}
	return limitError(inside.Permit(ctx, p.m, name, n, 0, false, opts))
}

// AcquireN waits until it holds k of the n permits of the semaphore called
// name at once, or ctx ends, as Acquire waits for one. The k permits are
// granted together in one step on the server, or none is: the result is one
// *lease.Lease, whose Release frees all k, whose renewal renews all k, and
// whose loss is one loss. k must be from 1 to n (an error wrapping
// lease.ErrInvalidOption otherwise); AcquireN with k = 1 is Acquire. The
// rules of n (ErrLimitMismatch, WithResize) are Acquire's.
// Acquire(ctx, name, n, WithCount(k)) is the same request, and reads
// better: n and k cannot be swapped unnoticed.
//
// With lease.WithFair(true) a request for k keeps its place in the queue
// as k requests for one would: those behind it are granted permits only
// while k remain for it, so a stream of single requests cannot starve it.
// Barging (the default), it is granted its permits only when it finds k
// free at one of its attempts, and a steady stream of barging requests for
// one permit may keep it out for as long as it lasts: ask with
// lease.WithFair(true) when that matters.
func (p *Permits) AcquireN(ctx context.Context, name string, n, k int, opts ...lease.AcquireOption) (*lease.Lease, error) {
	if p == nil || p.m == nil {
		return nil, errNoManager
	}
	if k < 1 {
		return nil, badK(n, k)
	}
	return limitError(inside.Permit(ctx, p.m, name, n, k, true, opts))
}

// TryAcquireN makes one attempt at k of the n permits of name, all or
// none, as TryAcquire makes one at a single permit (as does TryAcquire
// with WithCount(k)): an error wrapping lease.ErrNotAcquired when fewer
// than k are free (or promised to fair waiters), or the name is held by a
// lease or a reentrant lock. The error says which: how many permits were
// free and how many were asked ("pool": 1 of its 3 permits free, 2 asked,
// the caller's own permits counting as taken), or that fair waiters come
// first, or that another kind of holder has the name.
func (p *Permits) TryAcquireN(ctx context.Context, name string, n, k int, opts ...lease.AcquireOption) (*lease.Lease, error) {
	if p == nil || p.m == nil {
		return nil, errNoManager
	}
	if k < 1 {
		return nil, badK(n, k)
	}
	return limitError(inside.Permit(ctx, p.m, name, n, k, false, opts))
}

// badK is the error of a request for fewer than one permit.
func badK(n, k int) error {
	return fmt.Errorf("%w: %d of %d permits at once: from 1 to n", lease.ErrInvalidOption, k, n)
}

// Available reads how many permits of the semaphore called name are free,
// in one round trip that takes nothing, joins no queue and makes no lease.
// n is the caller's number of permits; while permits of name are held the
// n stored with them counts instead (the n a request would be judged by),
// so the answer is that n minus the permits held (a hold of k permits
// counts k), never below 0. A name held by a lease, a writer or a
// reentrant lock has 0 free. Fair waiters are not subtracted: permits
// found free may be promised to the queue. The answer is a snapshot: by the
// time it is read, others may have taken or freed permits.
func (p *Permits) Available(ctx context.Context, name string, n int) (int, error) {
	if p == nil || p.m == nil {
		return 0, errNoManager
	}
	free, _, err := inside.Available(ctx, p.m, name, n)
	if err != nil {
		return 0, fmt.Errorf("semaphore: available permits of %q: %w", name, err)
	}
	return free, nil
}

// limitError turns lease's error for a request refused for its n into a
// *LimitError.
func limitError(l *lease.Lease, err error) (*lease.Lease, error) {
	var lm *bridge.LimitMismatch
	if errors.As(err, &lm) {
		return l, &LimitError{Name: lm.Name, Held: lm.Held, Wanted: lm.Wanted}
	}
	return l, err
}

// Do holds a permit of name (k of them with WithCount(k)) while fn runs,
// as lease.Manager.Do holds a lease: it acquires one (waiting as Acquire),
// runs fn with a context cancelled when ctx ends or the permit is lost,
// and releases the permit when fn returns, even if fn panics. It returns fn's error; when the permit
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
