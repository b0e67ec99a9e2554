// Package backend is the storage side of tenure: the small interface between
// package lease and the Redis commands, its Redis implementation with the Lua
// scripts, an in-memory fake for deterministic tests under testing/synctest,
// and Renewer, through which package watchdog renews leases.
//
// A backend knows keys, tokens and TTLs; it knows nothing of deadlines,
// schedules or contexts of leases. Every method is safe for concurrent use.
package backend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrNotHeld is the per-item result of Renew and Release when the token does
// not hold the name (it expired, was released, or was taken over).
var ErrNotHeld = errors.New("not held by this token")

// ErrGone is ErrNotHeld (it wraps it) from a renewal that found the name
// free: its key was deleted, or expired, rather than held by another.
var ErrGone = fmt.Errorf("%w: the name is free (its key was deleted or expired)", ErrNotHeld)

// Request is one attempt to acquire a name.
type Request struct {
	// Name is the name to hold.
	Name string
	// Token is the attempt's random token. For a lease it is the holder's
	// proof of ownership; for a reentrant lock it names the attempt (for
	// Abandon and the fair queue), and Owner names the holder.
	Token string
	// TTL is the lease's time to live.
	TTL time.Duration
	// Owner, when set, makes the attempt one on a reentrant lock: the name's
	// key is a hash of owner -> count, and an owner that holds it enters
	// again instead of waiting.
	Owner string
	// Limit, when positive, makes the attempt one for a permit of a
	// semaphore of Limit permits: the name's key is a set of permits, and
	// the attempt takes one while fewer than Limit are held. Owner must be
	// empty.
	Limit int
	// Resize, for a permit, lets the request change the semaphore's N:
	// while permits are held under another N, Limit becomes the N
	// (permit.lua). Without it such a request is refused
	// (Acquisition.HeldLimit).
	Resize bool
	// Permits, for a permit request, is how many permits it takes at once,
	// all or none (permit.lua's k); 0 means 1. It must not exceed Limit.
	Permits int
	// Queue, when positive, makes the attempt fair: the name goes to waiters
	// in the order they first asked, and the queue forgets a waiter that
	// has not tried again for Queue.
	Queue time.Duration
}

// Item names one held lease or reentrant lock.
type Item struct {
	Name string
	// Token is a lease's token; for a reentrant lock it is the owner.
	Token string
	// TTL is the TTL a renewal sets. A Release uses it to bound how long
	// the release is remembered once the name is free; 0 means unknown.
	TTL time.Duration
	// Reentrant marks a reentrant lock.
	Reentrant bool
	// Permit marks a semaphore's permit (Request.Limit); Token is its
	// token.
	Permit bool
	// Permits is, for a Permit, how many permits the token holds
	// (Request.Permits); 0 means 1.
	Permits int
	// Light lets a Renew of a plain lease renew its key alone and leave
	// its fencing counter be: the watchdog sets it when the counter's last
	// refresh, which gave it twice the TTL, still outlives this renewal's
	// (watchdog.Renewal.Light). Other kinds, and other requests, ignore it.
	Light bool
	// Count is how many entries of a reentrant lock Release takes back;
	// 0 takes back all of the owner's.
	Count int
	// Memory is how long the server remembers a release of a lease or a
	// permit, so that a copy of it resent after a lost reply is answered as
	// the first was (a marker key, P{N}:retired:<op>): 0 means
	// keys.RetiredFor, Forget means not at all, and it is never longer than
	// TTL when TTL is known. Without the marker a resent copy finds the
	// name gone and answers ErrNotHeld. A reentrant lock ignores it: its
	// exits are always remembered, as applying one twice would free the
	// name under its owner.
	Memory time.Duration
	// Fence is, for a reentrant lock's Release, the fence of the hold the
	// release belongs to: while the name's fencing counter says another
	// hold (the owner's hold expired, and the owner, shared, took the name
	// again), the release is refused with ErrNotHeld, instead of taking
	// back the new hold's entries. 0 means not checked.
	Fence int64
	// Op names one Release or Reenter, so that a copy resent after a lost
	// reply is answered as the first was instead of applied twice. It must
	// be unique among the name's requests. Empty means the lease's token for
	// a lease (it is released once), and a fresh random id for a reentrant
	// lock (whose owner may enter and leave many times).
	Op string
}

// weight is k, the number of permits a permit's token holds, as a script
// argument: "" when it is one, which the scripts take as absent.
func weight(k int) string {
	if k <= 1 {
		return ""
	}
	return strconv.Itoa(k)
}

// Forget is Item.Memory for a release that is not remembered at all.
const Forget time.Duration = -1

// memory is how long the release of it is remembered once it frees the
// name (release.lua's ARGV[2]); 0 for not at all.
func (it Item) memory() time.Duration {
	switch {
	case it.Reentrant || it.Memory == 0:
		return retiredFree(it.TTL)
	case it.Memory < 0:
		return 0
	case it.TTL > 0 && it.TTL < it.Memory:
		return it.TTL
	}
	return it.Memory
}

func (it Item) op() string {
	switch {
	case it.Op != "":
		return it.Op
	case it.Reentrant:
		var b [16]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	return it.Token
}

// Item returns the item of a successful request.
func (r Request) Item() Item {
	switch {
	case r.Owner != "":
		return Item{Name: r.Name, Token: r.Owner, TTL: r.TTL, Reentrant: true}
	case r.Limit > 0:
		return Item{Name: r.Name, Token: r.Token, TTL: r.TTL, Permit: true, Permits: r.Permits}
	}
	return Item{Name: r.Name, Token: r.Token, TTL: r.TTL}
}

// Acquisition is the outcome of one Acquire attempt that reached the server.
type Acquisition struct {
	// Acquired reports whether the name was free and is now held by the
	// request (or, for a reentrant lock, already held by its owner).
	Acquired bool
	// Fence is the fencing token of the hold, when Acquired: a new one when
	// the name was free, the current one when a reentrant owner entered
	// again.
	Fence int64
	// Count is a reentrant owner's count after the attempt.
	Count int64
	// HolderTTL is, when not Acquired, the longest a waiter needs to wait
	// before the name could be free even if nobody lets it go: the holder's
	// remaining TTL, or the time the fair queue's head may still take.
	// Negative when the holder's key has no expiry.
	HolderTTL time.Duration
	// Arrival is when a fair request that was not Acquired joined the
	// queue (server time in microseconds): the queue's order. It is 0 for a
	// barging request.
	Arrival int64
	// Free is, for a permit request that found too few permits for it
	// (neither Acquired, Retired nor refused for its Limit), how many of
	// the Limit permits were free: Limit minus the live ones, never below
	// 0, fair waiters not subtracted (so Free >= Permits means the free
	// ones are promised to the queue); -1 when a lease, a writer or a
	// reentrant lock holds the name. 0 for other requests.
	Free int
	// HeldByPermits reports, for a lease or reentrant request that was
	// not Acquired, that permits hold the name (a semaphore's, or a
	// read-write lock's readers), for the waiter's error.
	HeldByPermits bool
	// HeldLimit, when positive, is the N that the semaphore's permits are
	// held under, which a permit request with another Limit and no
	// Resize was refused for at once: it touched nothing, and waiting
	// would not help while permits are held.
	HeldLimit int
	// Retired reports that the request's token was retired before the
	// request arrived (Abandon ran, or a lease under this token was
	// released): it was refused and touched nothing. A request with a
	// fresh token may succeed.
	Retired bool
}

// Backend stores leases.
type Backend interface {
	// Acquire takes the name for the request if, and only if, nothing holds
	// it (or, for a reentrant lock, the request's owner holds it), and
	// returns its fencing token. An error means the attempt may or may not
	// have been applied.
	Acquire(ctx context.Context, req Request) (Acquisition, error)

	// Renew sets the TTL of every item that still holds its name, in as few
	// round trips as the deployment allows, never shortening a TTL.
	// errs[i] receives the result for items[i]: nil when renewed, ErrNotHeld
	// when the item no longer holds the name, any other error when the
	// outcome is unknown. len(errs) must equal len(items). Neither slice
	// may be used after Renew returns: the caller reuses them.
	Renew(ctx context.Context, items []Item, errs []error)

	// Release lets go of every item that holds its name (a reentrant lock by
	// item.Count entries), and tells the name's waiters when it is free.
	// errs[i] is nil when done, ErrNotHeld when the item did not hold the
	// name (nothing was touched), any other error when the outcome is
	// unknown.
	Release(ctx context.Context, items []Item, errs []error)

	// Abandon takes back an Acquire whose outcome is unknown: it undoes the
	// request if it was applied, and otherwise makes sure it never will be,
	// should it still be on its way (for at least its TTL). It also takes
	// the request out of the fair queue. Token-safe like Release.
	Abandon(ctx context.Context, req Request) error

	// Leave takes a fair request that is giving up out of the queue.
	Leave(ctx context.Context, req Request) error

	// Reenter adds one entry to a reentrant lock that item's owner holds,
	// and returns the owner's count; ErrNotHeld when it does not hold it.
	Reenter(ctx context.Context, item Item) (int64, error)
}

// ReleaseOne releases one item: with b's own ReleaseOne when it has one,
// which spares the slices Release takes (a Release of one lease is the
// common case), and otherwise with Release.
func ReleaseOne(ctx context.Context, b Backend, it Item) error {
	if o, ok := b.(interface {
		ReleaseOne(context.Context, Item) error
	}); ok {
		return o.ReleaseOne(ctx, it)
	}
	errs := make([]error, 1)
	b.Release(ctx, []Item{it}, errs)
	return errs[0]
}

// fill sets every element of errs to err.
func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}
