// Package reentry connects package reentrant to the parts of package lease
// that lease does not export: acquiring a name as a reentrant lock, and
// entering or leaving one that is held. Package lease sets the functions
// when it is initialised; the values are a *lease.Manager, a *lease.Lease
// and a []lease.AcquireOption behind any, since lease cannot be imported
// from here.
package reentry

import "context"

var (
	// Acquire acquires name on manager m as a reentrant lock held by owner,
	// waiting (as Acquire) or not (as TryAcquire). exclusive says that no
	// other acquisition shares owner. It returns the *lease.Lease, or nil
	// and an error.
	Acquire func(ctx context.Context, m any, name, owner string, exclusive, wait bool, opts any) (any, error)
	// Enter adds an entry to a held reentrant lock and returns the owner's
	// count on the server.
	Enter func(ctx context.Context, l any) (int64, error)
	// Exit takes back one entry of a held reentrant lock that has more
	// than one through this lease.
	Exit func(ctx context.Context, l any) error
)
