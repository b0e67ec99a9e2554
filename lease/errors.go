package lease

import "errors"

// Errors for errors.Is. A lease's context is cancelled with ErrLost,
// ErrReleased or ErrClosed as its cause, and Lease.Err returns the same
// value.
var (
	// ErrNotAcquired: the name is held by another holder (TryAcquire), or
	// the wait's backoff policy gave up (Acquire).
	ErrNotAcquired = errors.New("tenure: lease not acquired: the name is held")
	// ErrLost: the lease ended without being released: a renewal found it
	// deleted or taken over, or its local deadline passed with no renewal
	// confirmed (the server may be unreachable, paused or slow).
	ErrLost = errors.New("tenure: lease lost")
	// ErrNotHeld: a Release or Extend of a lease this holder no longer
	// holds (lost, taken over, already released or closed). Nothing of
	// another holder was touched.
	ErrNotHeld = errors.New("tenure: lease not held")
	// ErrReleased: the lease was released by its holder.
	ErrReleased = errors.New("tenure: lease released")
	// ErrClosed: the manager was closed.
	ErrClosed = errors.New("tenure: manager closed")
	// ErrInvalidName: a name is empty, longer than MaxNameLen bytes, not
	// valid UTF-8, or starts with '}' (which would break the Cluster hash
	// tag that keeps a name's keys in one slot).
	ErrInvalidName = errors.New("tenure: invalid lease name")
	// ErrInvalidOption: an option's value is out of range.
	ErrInvalidOption = errors.New("tenure: invalid option")
)

// errFoundGone is the reason logged for a lease whose release found it
// deleted or taken over.
var errFoundGone = errors.New("the release found it deleted or taken over")
