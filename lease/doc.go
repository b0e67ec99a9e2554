// Package lease holds named leases on Redis and keeps them alive, watchdog
// style, for as long as the holder wants them and no longer than it can
// prove it holds them.
//
// A Manager acquires leases; a Lease is one held name. Each lease carries a
// context that is cancelled when the lease ends, and that is the whole
// contract with the work done under it: run the work under Lease.Context()
// and stop when it is done.
//
//	m, err := lease.New(client)                // one per process and Redis
//	l, err := m.Acquire(ctx, "nightly-report") // waits while another holds it
//	defer l.Release(context.Background())
//	err = job(l.Context(), l.Fence())          // stops when the lease is lost
//
// # What is promised
//
//   - At most one holder believes it holds a name at any instant, while the
//     Redis server keeps its data and the holder's own clock and scheduler
//     behave. Every lease has a local deadline: the send time of the last
//     acquire or renewal that the server confirmed, plus the TTL, minus a
//     drift margin (1% of the TTL plus 2ms by default). The lease's context
//     is cancelled no later than that deadline, which comes before the
//     server can expire the key — even when Redis is paused or unreachable
//     and no error ever arrives.
//   - Renewal and release compare the lease's 128-bit random token first:
//     nobody releases, extends or overwrites a lease it does not hold.
//     Releasing a lease that is no longer held returns ErrNotHeld and never
//     touches another holder's lease.
//   - A lease deleted or taken over on the server is noticed at the next
//     renewal (every TTL/3 by default) and its context is cancelled with
//     cause ErrLost.
//   - Every acquisition gets a fencing token (Lease.Fence) greater than
//     every one handed out before for the name, even after a Redis restart
//     that lost all data.
//   - An acquire whose reply never came may still be executed by the server
//     later; the manager takes its own token back so that no phantom lease
//     blocks the name.
//   - Close releases everything the manager holds and stops every goroutine
//     it started; a lease whose holder dies expires by its TTL.
//
// # What is not promised
//
// No lease library can promise safety when the holder's process is paused
// (a long GC, a stopped VM) for longer than the lease has left: it resumes
// believing in a lease that has expired, before its context can be
// cancelled. Pass Lease.Fence to the resource you protect and have it reject
// smaller fences. Nor can it survive a jump of the Redis host's clock, or a
// failover to an asynchronous replica that had not yet received the lease.
//
// # Redis keys
//
// For a name N and the prefix P ("tenure:" by default, WithKeyPrefix): P{N}
// holds the lease's token with a TTL, P{N}:fence the fencing counter (no
// TTL), and P{N}:released is the channel a release publishes on. The braces
// are a Redis Cluster hash tag: all keys of a name live in one slot.
//
// # Timeouts
//
// The context passed to Acquire bounds the wait, not the lease; the contexts
// passed to Acquire, Extend and Release also bound each round trip. go-redis
// itself honours a context's deadline only on a client created with
// ContextTimeoutEnabled; on another client a stalled command runs for its
// ReadTimeout, so the manager stops waiting for it when the context ends and
// lets it finish in the background (an acquire answered after its caller
// left is taken back). Set ContextTimeoutEnabled to spare that goroutine.
// The watchdog's renewals do not depend on it: lease contexts are cancelled
// by their local deadlines either way.
package lease
