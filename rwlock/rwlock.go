// Package rwlock provides read-write locks on Redis, built on packages
// lease and semaphore: many readers or one writer of a name at once, each
// holding a *lease.Lease with the full contract of a lease (a context
// cancelled with lease.ErrLost before the server could let anyone else in,
// renewal by the manager's watchdog, Release, Extend, Exec, a fence).
//
//	locks := rwlock.New(m)
//	r, err := locks.RLock(ctx, "catalog") // shared with other readers
//	...
//	w, err := locks.Lock(ctx, "catalog")  // alone: no reader, no other writer
//
// # How
//
// A writer holds a lease of the name; readers hold permits of a semaphore
// of the name with no practical limit (package semaphore). Both live at
// the name's key (one name is one lock, whatever kind holds it), so a
// writer and a reader exclude each other on the server, by the key's type,
// with no state to keep in step: a writer is a lease acquired with SET NX,
// which fails while any reader's permit (or another writer) holds the key,
// and a reader's permit is refused while a writer's lease holds it. Fences
// increase across readers and writers alike (docs/design.md, S5): a
// writer's fence is larger than every fence handed out before it, so a
// resource that rejects fences smaller than the largest it has seen
// rejects readers and writers that came before the writer writing.
//
// # Policy: writers first
//
// A stream of readers cannot starve a writer. A waiting writer joins the
// name's fair queue (its Lock is always fair, whatever lease.WithFair says),
// and a reader is admitted only while no writer holds the name and no
// writer waits in the queue; readers never queue. So once a writer waits,
// new readers wait behind it, the readers holding the lock finish, and the
// writer gets it; writers waiting together get it in the order they asked.
// The cost is the other way round: while writers keep arriving, readers
// wait. This is the policy of Go's sync.RWMutex, and like it, a reader must
// not take the read lock again while holding it: with a writer waiting in
// between, the second RLock would wait for the writer, which waits for the
// first.
//
// # No upgrade, no reentrancy
//
// A reader cannot become a writer: Lock with a context that carries a read
// lock of the same name from the same manager (the context of the read
// lock, or one derived from it) returns ErrUpgrade at once instead of
// waiting for itself forever; to write, release the read lock and Lock,
// and re-read what was read, since another writer may have come in
// between. Lock under a write lock of the same name, and RLock under either,
// return ErrReentry likewise. Only the innermost lease a context carries is
// seen (lease.FromContext): a lock held further out goes unnoticed and the
// call waits for it. The locks are not reentrant, unlike package
// reentrant's: a reentrant lock counts entries per owner in a hash, and a
// reader-writer lock with such counts would need a second key kept in step
// with the permits for every reader, for no safety gain.
//
// # Do and Downgrade
//
// RDo and Do run a function under a read or a write lock, as
// lease.Manager.Do runs one under a lease. Downgrade turns a write lock
// into a read lock in one step on the server, so that no writer gets in
// between: the write lock's lease ends (lease.ErrReleased) and the read
// lock is a new lease, with a larger fence. There is still no upgrade.
//
// Quorum (Redlock) managers refuse read-write locks with an error wrapping
// errors.ErrUnsupported; on Redis Cluster every key of a name shares its
// hash tag.
package rwlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/internal/bridge"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/semaphore"
)

// maxReaders is the readers' semaphore's number of permits: no limit in
// practice, and exact in the Lua doubles the scripts count in.
const maxReaders = 1 << 30

// ErrUpgrade is returned by Lock called under a read lock of the same name:
// waiting would deadlock, since the write lock waits for every reader.
var ErrUpgrade = errors.New("rwlock: a reader cannot upgrade to a writer: release the read lock first")

// ErrReentry is returned by Lock or RLock called under a write lock of the
// same name, and by RLock under a read lock of it: the locks are not
// reentrant, and waiting could deadlock.
var ErrReentry = errors.New("rwlock: the lock is held already by the caller's context, and is not reentrant")

// inside reaches the part of lease that tells a lease's kind.
var inside = bridge.Get[*lease.Manager, *lease.Lease, lease.AcquireOption]()

// Locker takes read and write locks through a lease.Manager, sharing its
// watchdog, its pub/sub connection and its key prefix. It keeps no state of
// its own and is safe for concurrent use.
type Locker struct {
	m       *lease.Manager
	permits *semaphore.Permits
}

// New returns a Locker over m. Closing m releases the locks it holds.
func New(m *lease.Manager) *Locker {
	return &Locker{m: m, permits: semaphore.New(m)}
}

// RLock waits until it holds a read lock of name, or ctx ends, as
// lease.Manager.Acquire waits. It waits while a writer holds the name or
// waits for it. opts are the options of an acquisition; lease.WithFair is
// ignored (readers never queue).
func (k *Locker) RLock(ctx context.Context, name string, opts ...lease.AcquireOption) (*lease.Lease, error) {
	return k.rlock(ctx, name, opts, true)
}

// TryRLock makes one attempt at a read lock: it returns an error wrapping
// lease.ErrNotAcquired at once if a writer holds name or waits for it.
func (k *Locker) TryRLock(ctx context.Context, name string, opts ...lease.AcquireOption) (*lease.Lease, error) {
	return k.rlock(ctx, name, opts, false)
}

// Lock waits until it holds the write lock of name, or ctx ends: until no
// reader and no other writer holds it. It waits in the name's fair queue,
// which keeps new readers out meanwhile. opts are the options of an
// acquisition; lease.WithFair is overridden (writers always queue).
func (k *Locker) Lock(ctx context.Context, name string, opts ...lease.AcquireOption) (*lease.Lease, error) {
	return k.lock(ctx, name, opts, true)
}

// TryLock makes one attempt at the write lock: it returns an error wrapping
// lease.ErrNotAcquired at once if a reader or a writer holds name, or a
// writer waits for it.
func (k *Locker) TryLock(ctx context.Context, name string, opts ...lease.AcquireOption) (*lease.Lease, error) {
	return k.lock(ctx, name, opts, false)
}

// RDo holds a read lock of name while fn runs, as lease.Manager.Do holds a
// lease: it waits for the read lock (as RLock), runs fn with a context
// cancelled when ctx ends or the read lock is lost, and releases it when
// fn returns, even if fn panics. It returns fn's error; when the lock ended
// before fn returned, or its release found it gone, the error also wraps
// lease.ErrLost (or lease.ErrClosed), even if fn returned nil.
func (k *Locker) RDo(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...lease.AcquireOption) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", lease.ErrInvalidOption)
	}
	l, err := k.RLock(ctx, name, opts...)
	if err != nil {
		return err
	}
	return inside.Run(ctx, l, fn)
}

// Do holds the write lock of name while fn runs, as RDo holds a read lock:
// it waits as Lock, and returns as RDo does.
func (k *Locker) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...lease.AcquireOption) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", lease.ErrInvalidOption)
	}
	l, err := k.Lock(ctx, name, opts...)
	if err != nil {
		return err
	}
	return inside.Run(ctx, l, fn)
}

// Downgrade turns the write lock w (from Lock or TryLock on this Locker's
// manager) into a read lock of the same name, in one step on the server:
// no writer, and no other holder, can get in between. The readers waiting
// may then enter beside it, unless a writer waits (writers first); a
// writer waiting gets in once the read lock, and every other, is
// released. w ends, its context cancelled with lease.ErrReleased before
// the request is sent (as Release ends a lease before its delete), so no
// reader is let in while w's context is live; the read lock returned is a
// lease of its own, renewed by the watchdog, with its own token and a new
// fence, greater than w's (as every acquisition's: docs/design.md, S5).
// opts are the options of the read lock's acquisition (lease.WithTTL,
// ...); ctx bounds the round trip.
//
// w has ended whatever the outcome. When w had ended already it returns
// an error wrapping lease.ErrNotHeld. When the server finds w no longer
// held (deleted or taken over since its last renewal) the error wraps
// lease.ErrLost as well, as Release's does. When the outcome is unknown
// (a timeout, a broken connection) it returns that error, and both the
// write lock and the read lock the server may have made are released in
// the background: the caller holds neither.
func (k *Locker) Downgrade(ctx context.Context, w *lease.Lease, opts ...lease.AcquireOption) (*lease.Lease, error) {
	if k == nil || k.m == nil {
		return nil, fmt.Errorf("%w: rwlock: Locker without a manager (use New)", lease.ErrInvalidOption)
	}
	if held, reader := inside.Holds(k.m, w); held && reader {
		return nil, fmt.Errorf("%w: rwlock: %q: a read lock is downgraded already", lease.ErrInvalidOption, w.Name())
	}
	opts = append(opts[:len(opts):len(opts)], lease.WithFair(false))
	return inside.Downgrade(ctx, k.m, w, maxReaders, opts)
}

func (k *Locker) rlock(ctx context.Context, name string, opts []lease.AcquireOption, wait bool) (*lease.Lease, error) {
	if err := k.check(ctx, name, false); err != nil {
		return nil, err
	}
	opts = append(opts[:len(opts):len(opts)], lease.WithFair(false))
	if wait {
		return k.permits.Acquire(ctx, name, maxReaders, opts...)
	}
	return k.permits.TryAcquire(ctx, name, maxReaders, opts...)
}

func (k *Locker) lock(ctx context.Context, name string, opts []lease.AcquireOption, wait bool) (*lease.Lease, error) {
	if err := k.check(ctx, name, true); err != nil {
		return nil, err
	}
	opts = append(opts[:len(opts):len(opts)], lease.WithFair(true))
	if wait {
		return k.m.Acquire(ctx, name, opts...)
	}
	return k.m.TryAcquire(ctx, name, opts...)
}

// check refuses a lock that ctx holds already, which the call would wait
// for forever.
func (k *Locker) check(ctx context.Context, name string, write bool) error {
	if k == nil || k.m == nil {
		return fmt.Errorf("%w: rwlock: Locker without a manager (use New)", lease.ErrInvalidOption)
	}
	l, ok := lease.FromContext(ctx)
	if !ok || l.Name() != name {
		return nil
	}
	held, reader := inside.Holds(k.m, l)
	switch {
	case !held:
		return nil
	case reader && write:
		return fmt.Errorf("%w: %q", ErrUpgrade, name)
	}
	return fmt.Errorf("%w: %q", ErrReentry, name)
}
