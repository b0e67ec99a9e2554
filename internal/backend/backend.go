// Package backend is the storage side of tenure: the small interface between
// the timing logic (package watchdog, package lease) and the Redis commands,
// its Redis implementation with the Lua scripts, and an in-memory fake for
// deterministic tests under testing/synctest.
//
// A backend knows keys, tokens and TTLs; it knows nothing of deadlines,
// schedules or contexts of leases. Every method is safe for concurrent use.
package backend

import (
	"context"
	"errors"
	"time"
)

// ErrNotHeld is the per-item result of Renew and Release when the token does
// not hold the name (it expired, was released, or was taken over).
var ErrNotHeld = errors.New("not held by this token")

// Item names one held lease: the name, the holder's token and, for Renew, the
// TTL to set.
type Item struct {
	Name  string
	Token string
	TTL   time.Duration
}

// Acquisition is the outcome of one Acquire attempt that reached the server.
type Acquisition struct {
	// Acquired reports whether the name was free and is now held by the token.
	Acquired bool
	// Fence is the fencing token of the new lease, when Acquired.
	Fence int64
	// HolderTTL is the current holder's remaining TTL when not Acquired: the
	// longest a waiter needs to wait before the name is free even if its
	// holder died. Negative when the holder's key has no expiry.
	HolderTTL time.Duration
}

// Backend stores leases.
type Backend interface {
	// Acquire sets name to token with the given TTL if, and only if, nothing
	// holds the name, and returns the next fencing token for the name. An
	// error means the attempt may or may not have been applied.
	Acquire(ctx context.Context, name, token string, ttl time.Duration) (Acquisition, error)

	// Renew sets the TTL of every item whose token still holds its name, in
	// as few round trips as the deployment allows, never shortening a TTL.
	// errs[i] receives the result for items[i]: nil when renewed, ErrNotHeld
	// when the token no longer holds the name, any other error when the
	// outcome is unknown. len(errs) must equal len(items).
	Renew(ctx context.Context, items []Item, errs []error)

	// Release deletes every item whose token holds its name, and tells the
	// name's waiters. errs[i] is nil when deleted, ErrNotHeld when the token
	// did not hold the name (nothing was touched), any other error when the
	// outcome is unknown.
	Release(ctx context.Context, items []Item, errs []error)

	// Abandon takes back an Acquire of token whose outcome is unknown: it
	// deletes the lease if the Acquire was applied, and otherwise makes sure
	// it never will be, should the request still be on its way (for at
	// least ttl, the TTL it asked for). Token-safe like Release.
	Abandon(ctx context.Context, name, token string, ttl time.Duration) error
}

// fill sets every element of errs to err.
func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}
