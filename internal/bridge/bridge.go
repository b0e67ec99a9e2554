// Package bridge connects packages reentrant, semaphore, rwlock and
// leasetest to the parts of package lease that lease does not export:
// acquiring a name as a reentrant lock, entering or leaving one that is
// held, acquiring a semaphore's permit, and a manager on another backend.
//
// lease cannot be imported from here (lease imports this package), so the
// bridge is generic in lease's types: lease sets a Bridge of its own types
// when it is initialised, and the others get it back naming the same types.
// Every function is typed at both ends; were the two to name different
// types, Get panics when the other package is initialised, which every test
// of it shows at once, rather than dropping anything silently.
package bridge

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Bridge is what packages reentrant and semaphore need of package lease: M
// is *lease.Manager, L *lease.Lease, O lease.AcquireOption.
type Bridge[M, L, O any] struct {
	// Acquire acquires name on manager m as a reentrant lock held by owner,
	// waiting (as Acquire) or not (as TryAcquire).
	Acquire func(ctx context.Context, m M, name, owner string, wait bool, opts []O) (L, error)
	// Enter adds an entry to a held reentrant lock and returns the owner's
	// count on the server.
	Enter func(ctx context.Context, l L) (int64, error)
	// Exit takes back one entry of a held reentrant lock that has more
	// than one through this lease.
	Exit func(ctx context.Context, l L) error
	// Permit acquires k permits (all at once, or none) of the semaphore of
	// n permits called name on manager m, waiting (as Acquire) or not (as
	// TryAcquire). k = 0 takes Count's k from opts, or 1.
	Permit func(ctx context.Context, m M, name string, n, k int, wait bool, opts []O) (L, error)
	// Available reads how many of n permits of name are free, and the n
	// they are counted of (the stored n while permits are held).
	Available func(ctx context.Context, m M, name string, n int) (free, limit int, err error)
	// Downgrade replaces w, a writer's lease of m, with one permit of the
	// semaphore of n permits of its name, in one step, and returns the
	// permit's lease; w ends.
	Downgrade func(ctx context.Context, m M, w L, n int, opts []O) (L, error)
	// Resize returns the acquire option of semaphore.WithResize: a permit
	// request that may change the N the name's permits are held under.
	Resize func(on bool) O
	// Count returns the acquire option of semaphore.WithCount: how many
	// permits a request takes at once.
	Count func(k int) O
	// Run runs fn under the held l and releases l when fn returns, as
	// lease.Manager.Do does once it holds its lease.
	Run func(ctx context.Context, l L, fn func(context.Context) error) error
	// Holds reports whether l was acquired through m and is still held,
	// and whether it is a permit.
	Holds func(m M, l L) (held, permit bool)
	// OnBackend returns a manager with opts whose leases live in be, a
	// backend.Backend (the in-memory one of package leasetest).
	OnBackend func(be any, opts []any) (M, error)
	// Client returns the Redis client m was made with (lease.New's), or
	// nil when m has none of its own: a quorum manager's, or one on
	// another backend.
	Client func(m M) redis.UniversalClient
}

// LimitMismatch is lease's error for a permit request refused because the
// name's permits are held under another N (backend.Acquisition.HeldLimit);
// package semaphore turns it into its own error, semaphore.LimitError.
type LimitMismatch struct {
	Name         string
	Held, Wanted int
}

func (e *LimitMismatch) Error() string {
	return fmt.Sprintf("semaphore %q has n=%d while its permits are held; this request asked n=%d", e.Name, e.Held, e.Wanted)
}

var bridge any

// Set records lease's bridge; package lease calls it from init.
func Set[M, L, O any](b Bridge[M, L, O]) { bridge = b }

// Get returns the bridge lease set, for the types it names.
func Get[M, L, O any]() Bridge[M, L, O] {
	b, ok := bridge.(Bridge[M, L, O])
	if !ok {
		panic(fmt.Sprintf("bridge: package lease set a %T, not a %T", bridge, Bridge[M, L, O]{}))
	}
	return b
}
