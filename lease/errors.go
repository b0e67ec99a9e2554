package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-go/tenure/internal/backend"
)

// Errors for errors.Is. A lease's context is cancelled with ErrLost,
// ErrReleased or ErrClosed as its cause, and Lease.Err returns the same
// value. Every error of this package starts with "lease: ", once.
var (
	// ErrNotAcquired: no lease was acquired: the name is held by another
	// holder (TryAcquire), or the wait ended first (Acquire: its context
	// ended, whose error the error also wraps, or the backoff policy gave
	// up). The message says the name was held only when an attempt found
	// it held.
	ErrNotAcquired = errors.New("lease: not acquired")
	// ErrLost: the lease ended without being released: a renewal found it
	// deleted or taken over, or its local deadline passed with no renewal
	// confirmed (the server may be unreachable, paused or slow).
	ErrLost = errors.New("lease: lost")
	// ErrNotHeld: a Release or Extend of a lease this holder no longer
	// holds (lost, taken over, already released or closed). Nothing of
	// another holder was touched.
	ErrNotHeld = errors.New("lease: not held")
	// ErrReleased: the lease was released by its holder.
	ErrReleased = errors.New("lease: released")
	// ErrClosed: the manager was closed.
	ErrClosed = errors.New("lease: manager closed")
	// ErrInvalidName: a name is empty, longer than MaxNameLen bytes, not
	// valid UTF-8, or starts with '}' (which would break the Cluster hash
	// tag that keeps a name's keys in one slot).
	ErrInvalidName = errors.New("lease: invalid name")
	// ErrInvalidOption: an option's value is out of range.
	ErrInvalidOption = errors.New("lease: invalid option")
	// ErrOverloaded: no lease was acquired because the manager is behind
	// with the renewals of the leases it holds, or near the most it can
	// renew (the process short of CPU, the server or the network to it
	// unable to keep up): held leases come first, and a new one would
	// only add renewals that push them past their deadlines. TryAcquire
	// returns it at once; Acquire waits while it lasts, by its backoff
	// policy, and returns it if the wait ends first. The error matches
	// ErrNotAcquired too.
	ErrOverloaded = errors.New("lease: overloaded: renewals of held leases are behind")
)

// errFoundGone is the reason logged for a lease whose release found it
// deleted or taken over.
var errFoundGone = errors.New("the release found it deleted or taken over")

// ctxError is why ctx ended, for errors.Is on both ctx.Err() and its
// cause when the two differ (context.WithTimeoutCause, WithCancelCause).
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// notAcquired is Acquire's error when the wait ended with why (ctx's
// error, or another reason); held says the last attempt found the name
// held, and fair that it was a fair waiter's (which may also have found
// the name promised to an earlier waiter).
func notAcquired(name string, held, fair bool, why error) error {
	switch {
	case held && fair:
		return fmt.Errorf("%w: %q: not yet its turn (the name is held, or promised to an earlier waiter): %w", ErrNotAcquired, name, why)
	case held:
		return fmt.Errorf("%w: %q is held by another holder: %w", ErrNotAcquired, name, why)
	}
	return fmt.Errorf("%w: %q: %w", ErrNotAcquired, name, why)
}

// heldBy says what an attempt found that left no room for req: for a
// lease, that the name is held; for permits, how many of the n were free
// beside how many were asked (the asker's own permits count as taken: it
// may hold 2 of 3 itself), or that the free ones are promised to fair
// waiters, or that another kind of holder has the name.
//
// mine says that the manager that asked holds a lease on the name itself
// (a lease is not reentrant: it waits for itself).
func heldBy(req backend.Request, res backend.Acquisition, mine bool) string {
	if req.Limit == 0 {
		switch {
		case mine:
			return fmt.Sprintf("%q is held by this same manager (a lease on it that this manager acquired "+
				"and has not released: a lease is not reentrant; package reentrant's locks are)", req.Name)
		case res.HeldByPermits:
			return fmt.Sprintf("%q is held by readers or permits (a read-write lock's readers, or a semaphore's permits)", req.Name)
		}
		return fmt.Sprintf("%q is held by another holder", req.Name)
	}
	k := max(req.Permits, 1)
	switch {
	case res.Free < 0:
		return fmt.Sprintf("%q is held by a lease, a write lock or a reentrant lock, not by permits", req.Name)
	case res.Free >= k:
		return fmt.Sprintf("%q: its free permits are promised to fair waiters ahead (or a waiting writer)", req.Name)
	}
	return fmt.Sprintf("%q: %d of its %d permits free, %d asked", req.Name, res.Free, req.Limit, k)
}

// errBackOffStop is the reason of a wait whose backoff policy gave up.
var errBackOffStop = errors.New("the backoff policy gave up")

// prefix starts every error of this package, once.
const prefix = "lease: "

// bare shows err inside a message of this package without the prefix the
// message has already ("lease: not held: \"x\": lost", not "...: lease:
// lost"); errors.Is and errors.As still find err.
func bare(err error) error {
	if err == nil {
		return nil
	}
	return bareError{err}
}

type bareError struct{ err error }

func (b bareError) Error() string { return strings.TrimPrefix(b.err.Error(), prefix) }
func (b bareError) Unwrap() error { return b.err }
