// Package reentrant provides reentrant locks on Redis, built on package
// lease: a lock its owner may take again while holding it, released when it
// has been unlocked as many times as it was locked.
//
// The owner travels in the context. The context of a held Lock carries its
// owner, so code running under it that locks the same name enters again
// instead of waiting for itself:
//
//	lk, err := locker.Lock(ctx, "account:42")
//	...
//	defer lk.Unlock(context.Background())
//	transfer(lk.Context()) // may Lock "account:42" again without deadlock
//
// A context without an owner gets a fresh random one at Lock. WithOwner sets
// an owner explicitly, for a job id shared across goroutines or processes:
// every Lock with that owner enters the same lock.
//
// On the server a reentrant lock is a hash at the name's key (the key a
// lease of the same name would use, so one name is one lock whatever kind
// holds it: a lease and a reentrant lock on the same name exclude each
// other), with the owner as field and its count as value. The watchdog of
// the lease.Manager renews it while its count is above zero; losing it
// cancels the contexts of every Lock of it. Its fencing token is the one of
// the acquisition that took the free name, unchanged on entering again.
package reentrant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/bridge"
	"github.com/tenure-go/tenure/lease"
)

// inside reaches the parts of lease that reentrant locks need and lease
// does not export.
var inside = bridge.Get[*lease.Manager, *lease.Lease, lease.AcquireOption]()

// ErrInvalidOwner is returned for an empty owner or one over MaxOwnerLen.
var ErrInvalidOwner = errors.New("reentrant: invalid owner")

// MaxOwnerLen is the longest owner accepted, in bytes.
const MaxOwnerLen = 1024

type ownerKey struct{}

// WithOwner returns a context carrying owner: every Lock made with it (or
// with a context derived from it) enters the lock of that owner. Use it for
// an identity shared across goroutines or processes, such as a job id;
// owners must be unique to the job, for a lock admits whoever presents its
// owner.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// Owner returns the owner ctx carries, if any.
func Owner(ctx context.Context) (string, bool) {
	o, ok := ctx.Value(ownerKey{}).(string)
	return o, ok
}

// A Locker takes reentrant locks through a lease.Manager, sharing its
// watchdog, its pub/sub connection and its key prefix. It is safe for
// concurrent use.
type Locker struct {
	m *lease.Manager

	mu   sync.Mutex
	held map[holdKey]*hold
}

type holdKey struct{ owner, name string }

// hold is one lease on the server for an (owner, name), shared by every
// Lock of that owner in this Locker.
type hold struct {
	l     *lease.Lease
	mu    sync.Mutex // orders entries and exits
	locks int        // Locks not yet unlocked
}

// New returns a Locker over m. Closing m releases the locks it holds.
func New(m *lease.Manager) *Locker {
	return &Locker{m: m, held: map[holdKey]*hold{}}
}

// Lock takes name for the owner ctx carries (a fresh one if none), waiting
// while another owner holds it, as lease.Manager.Acquire waits; if the owner
// holds it already, Lock enters it once more. ctx bounds the wait, not the
// lock. opts apply when the name is taken, not when it is entered again.
func (k *Locker) Lock(ctx context.Context, name string, opts ...lease.AcquireOption) (*Lock, error) {
	return k.lock(ctx, name, opts, true)
}

// TryLock is Lock without waiting: it returns an error wrapping
// lease.ErrNotAcquired at once if another owner holds name.
func (k *Locker) TryLock(ctx context.Context, name string, opts ...lease.AcquireOption) (*Lock, error) {
	return k.lock(ctx, name, opts, false)
}

func (k *Locker) lock(ctx context.Context, name string, opts []lease.AcquireOption, wait bool) (*Lock, error) {
	owner, shared := Owner(ctx)
	if shared {
		if owner == "" || len(owner) > MaxOwnerLen {
			return nil, fmt.Errorf("%w: %d bytes", ErrInvalidOwner, len(owner))
		}
		if lk, err := k.enter(ctx, owner, name); lk != nil || err != nil {
			return lk, err
		}
	} else {
		owner = newOwner()
	}
	l, err := inside.Acquire(ctx, k.m, name, owner, wait, opts)
	if err != nil {
		return nil, err
	}
	h := &hold{l: l, locks: 1}
	key := holdKey{owner, name}
	k.mu.Lock()
	k.held[key] = h // a hold acquired concurrently for the same owner stays usable by its Locks
	k.mu.Unlock()
	return newLock(k, h, key, owner), nil
}

// enter enters the lock an owner holds through this Locker, if it does; a
// nil Lock and error mean it does not.
func (k *Locker) enter(ctx context.Context, owner, name string) (*Lock, error) {
	key := holdKey{owner, name}
	k.mu.Lock()
	h := k.held[key]
	k.mu.Unlock()
	if h == nil {
		return nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.locks == 0 || h.l.Err() != nil {
		return nil, nil // unlocked or lost meanwhile: take the name anew
	}
	if err := ctx.Err(); err != nil {
		err := ctx.Err()
		if cause := context.Cause(ctx); !errors.Is(cause, err) {
			err = fmt.Errorf("%w (%w)", cause, err) // errors.Is finds both
		}
		return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, name, err)
	}
	if _, err := inside.Enter(ctx, h.l); err != nil {
		return nil, err
	}
	h.locks++
	return newLock(k, h, key, owner), nil
}

func (k *Locker) forget(key holdKey, h *hold) {
	k.mu.Lock()
	if k.held[key] == h {
		delete(k.held, key)
	}
	k.mu.Unlock()
}

// A Lock is one entry into a reentrant lock. Unlock it once.
type Lock struct {
	k      *Locker
	h      *hold
	key    holdKey
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	unlocked bool
}

func newLock(k *Locker, h *hold, key holdKey, owner string) *Lock {
	ctx, cancel := context.WithCancelCause(WithOwner(h.l.Context(), owner))
	return &Lock{k: k, h: h, key: key, ctx: ctx, cancel: cancel}
}

// A nil *Lock (the result of a failed Lock) holds nothing: its methods
// never panic, so that "defer lk.Unlock(ctx)" written before the error
// check is harmless. Its Err, Unlock and Exec return errors wrapping
// lease.ErrNotHeld, and its context is cancelled with that cause.
var errNilLock = fmt.Errorf("%w: nil lock (its Lock failed)", lease.ErrNotHeld)

var nilLockCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errNilLock)
	return ctx
}()

// Name returns the name locked ("" for a nil Lock).
func (lk *Lock) Name() string {
	if lk == nil {
		return ""
	}
	return lk.key.name
}

// Owner returns the lock's owner ("" for a nil Lock).
func (lk *Lock) Owner() string {
	if lk == nil {
		return ""
	}
	return lk.key.owner
}

// Fence returns the fencing token of the acquisition that took the name;
// entering again does not change it.
func (lk *Lock) Fence() int64 {
	if lk == nil {
		return 0
	}
	return lk.h.l.Fence()
}

// Context returns a context that carries the owner, so that locking the same
// name under it enters again, and is cancelled when this Lock is unlocked or
// the lock is lost (context.Cause: lease.ErrReleased, lease.ErrLost or
// lease.ErrClosed).
func (lk *Lock) Context() context.Context {
	if lk == nil {
		return nilLockCtx
	}
	return lk.ctx
}

// Done is Context().Done().
func (lk *Lock) Done() <-chan struct{} { return lk.Context().Done() }

// Err returns nil while this Lock holds, then why it stopped: ErrReleased
// after Unlock, or the lock's end (ErrLost, ErrClosed).
func (lk *Lock) Err() error {
	if lk == nil {
		return errNilLock
	}
	lk.mu.Lock()
	unlocked := lk.unlocked
	lk.mu.Unlock()
	if err := lk.h.l.Err(); err != nil {
		return err
	}
	if unlocked {
		return lease.ErrReleased
	}
	return nil
}

// Deadline returns the lock's local deadline (see lease.Lease.Deadline).
func (lk *Lock) Deadline() time.Time {
	if lk == nil {
		return time.Time{}
	}
	return lk.h.l.Deadline()
}

// Exec applies the writes fn queues atomically, only while the owner holds
// the lock, as lease.Lease.Exec does; it returns an error wrapping
// lease.ErrLost, having written nothing, when the lock is no longer held.
func (lk *Lock) Exec(ctx context.Context, fn func(pipe redis.Pipeliner) error) ([]redis.Cmder, error) {
	if lk == nil {
		return nil, errNilLock
	}
	if err := lk.Err(); err != nil {
		return nil, fmt.Errorf("%w: %q: %w", lease.ErrLost, lk.key.name, leaseCause{err})
	}
	return lk.h.l.Exec(ctx, fn)
}

// Unlock takes this entry back: the owner's count on the server goes down
// by one, and the last Unlock of the owner deletes the key and wakes the
// name's waiters. Unlocking a Lock twice returns an error wrapping
// lease.ErrNotHeld and changes nothing: a count never goes below zero.
// Unlocking a lock that was lost returns an error wrapping lease.ErrNotHeld.
func (lk *Lock) Unlock(ctx context.Context) error {
	if lk == nil {
		return errNilLock
	}
	lk.mu.Lock()
	if lk.unlocked {
		lk.mu.Unlock()
		return fmt.Errorf("%w: %q: unlocked already", lease.ErrNotHeld, lk.key.name)
	}
	lk.unlocked = true
	lk.mu.Unlock()
	defer lk.cancel(lease.ErrReleased)

	h := lk.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.locks--
	if h.locks > 0 {
		return inside.Exit(ctx, h.l)
	}
	lk.k.forget(lk.key, h)
	return h.l.Release(ctx)
}

// newOwner returns a fresh random owner: 128 bits from crypto/rand, hex.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// leaseCause shows an error of package lease inside a message that starts
// with lease's prefix already, without repeating it; errors.Is still finds
// it.
type leaseCause struct{ err error }

func (c leaseCause) Error() string { return strings.TrimPrefix(c.err.Error(), "lease: ") }
func (c leaseCause) Unwrap() error { return c.err }
