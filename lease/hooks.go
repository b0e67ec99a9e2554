package lease

import (
	"context"
	"time"
)

// Hooks let a Manager report what its leases do, for traces, metrics or
// logs, without tenure importing a telemetry SDK: package tracing implements
// them with OpenTelemetry. Every field may be nil.
//
// Hooks are called synchronously. Renewed and Ended are called from the
// watchdog's goroutines, which renew many leases each: they must be quick
// and must not block. Hooks must not call back into the Manager or the Lease
// except for the Lease's accessors (Name, Fence, Token, Context, Deadline).
type Hooks struct {
	// AcquireStart is called when Acquire, TryAcquire or Do begins. The
	// context it returns is the one the acquisition uses; the lease's
	// context keeps its values, so a span started here is the parent of
	// the work done under the lease.
	AcquireStart func(ctx context.Context, name string) context.Context
	// AcquireDone is called once for every AcquireStart, with the context
	// AcquireStart returned.
	AcquireDone func(ctx context.Context, info AcquireInfo)

	// Renewed is called after each automatic renewal of a lease: err is nil
	// when the server renewed it, otherwise the error of an attempt whose
	// outcome is unknown, which is retried until the lease's local deadline.
	// A renewal that finds the lease gone ends it instead (Ended).
	Renewed func(l *Lease, err error)

	// ExtendStart and ExtendDone bracket Lease.Extend; ExtendDone gets the
	// context ExtendStart returned and Extend's result.
	ExtendStart func(ctx context.Context, l *Lease, ttl time.Duration) context.Context
	ExtendDone  func(ctx context.Context, l *Lease, err error)

	// ReleaseStart and ReleaseDone bracket Lease.Release (and the release
	// at the end of Do); ReleaseDone gets the context ReleaseStart returned
	// and Release's result.
	ReleaseStart func(ctx context.Context, l *Lease) context.Context
	ReleaseDone  func(ctx context.Context, l *Lease, err error)

	// Ended is called once when a lease ends, however it ends.
	Ended func(l *Lease, info EndInfo)
}

// AcquireInfo describes one Acquire, TryAcquire or Do acquisition.
type AcquireInfo struct {
	// Name is the name asked for.
	Name string
	// Lease is the lease acquired; nil when Err is not.
	Lease *Lease
	// Attempts counts the round trips that tried to take the name.
	Attempts int
	// Waited is how long the acquisition took, from start to result.
	Waited time.Duration
	// Err is why no lease was acquired: it wraps ErrNotAcquired when the
	// name was held (TryAcquire) or the wait ended, ErrClosed, or the error
	// of the round trip.
	Err error
}

// EndInfo describes how a lease ended.
type EndInfo struct {
	// Cause is ErrReleased, ErrLost or ErrClosed: the lease context's cause.
	Cause error
	// Loss says why a lease ended with ErrLost: LossDeleted, LossTakenOver
	// or LossExpired.
	// It is empty for other causes.
	Loss LossReason
	// Held is how long the lease was held, from the acquire's reply.
	Held time.Duration
}

// LossReason says why a lease was lost.
type LossReason string

// The reasons a lease is lost.
const (
	// LossDeleted: a renewal or Extend found the name free on the server:
	// its key was deleted (or expired there, as after a restart that lost
	// data).
	LossDeleted LossReason = "deleted"
	// LossTakenOver: a renewal or Extend found the lease held by
	// another token on the server.
	LossTakenOver LossReason = "taken_over"
	// LossExpired: the lease's local deadline passed without a renewal the
	// server confirmed in time (Redis unreachable, slow or paused).
	LossExpired LossReason = "expired"
)
