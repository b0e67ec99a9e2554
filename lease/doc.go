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
//     every one handed out before for the name, whatever data Redis comes
//     back with (none, an older snapshot, a lagged replica): it is
//     max(counter + 1, server time in microseconds).
//   - A takeover that only the release finds is a loss too: Release wraps
//     ErrLost as well as ErrNotHeld, and Do returns ErrLost.
//   - An acquire whose reply never came may still be executed by the server
//     later; the manager takes its own token back so that no phantom lease
//     blocks the name.
//   - Close releases everything the manager holds and stops every goroutine
//     it started; a lease whose holder dies expires by its TTL, and no key
//     of a name outlives its last holder and waiter by more than a TTL.
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
// # Waiting
//
// Acquire tries once; while the name is held it waits for whichever comes
// first: a message on the name's release channel, the holder's remaining TTL
// (a holder can die without releasing), or a step of its backoff policy
// (WithBackOff; by default 50ms doubling up to 1s), then tries again. One
// pub/sub connection per manager serves every waiter, subscribed to a name's
// channel only while someone waits for it. A release message wakes one
// waiter of each manager rather than all of them, so a handoff costs a
// message and an attempt, not a stampede: the one woken wins unless a waiter
// elsewhere was quicker, and the rest wait for the next release. An Acquire
// that finds waiters of its own manager on the name waits behind them: a
// holder that releases and asks again does not take the name straight back.
// A message lost to a reconnection costs at most one backoff step.
//
// By default whoever asks first after a release wins (barging). WithFair(true)
// grants the name to waiters in the order they first asked, across managers
// and processes, through a queue kept in Redis; a waiter that stops asking is
// forgotten after DefaultQueueTimeout. Barging acquires wait behind a fair
// queue too, so that fairness holds whoever asks.
//
// # Guarded writes
//
// Lease.Exec applies a set of Redis writes in one MULTI/EXEC transaction that
// Redis executes only while the lease still holds its name, and otherwise
// writes nothing and returns ErrLost. This is the safe form of "a
// transaction under a distributed lock" for data kept in the same Redis. On a
// Cluster the written keys must share the name's hash tag, {N}.
//
// # Several names at once
//
// AcquireAll, TryAcquireAll and DoAll hold a Set of names, all or none: a
// lease on each (its own token, fence and renewal) and one context,
// cancelled when any of them ends. The names are taken one after another in
// byte order, so callers asking for overlapping sets in different orders
// never deadlock; it is ordered, not atomic: until the last name is taken,
// others may see some held, and a name that cannot be taken (or one already
// taken that is lost meanwhile) makes the Set release what it took. On a
// Cluster, where the names may live in different slots, it works the same.
//
// # Reentrant locks
//
// Package reentrant builds reentrant locks on a Manager: the name's key is
// then a hash of owner -> count instead of a token. One name is one lock: a
// lease and a reentrant lock on the same name exclude each other.
//
// # Observing leases
//
// WithHooks sets functions called as leases are acquired, renewed, extended,
// released and lost; package tracing implements them with OpenTelemetry
// spans and metrics. A lost lease is also logged as a warning with its name,
// fence and cause (WithLogger); nothing is logged per renewal above Debug.
//
// # Deployments
//
// New works over any go-redis UniversalClient: one server, a Sentinel
// failover client, or a Cluster (every key of a name shares its hash tag, so
// each script touches one slot; renewals are pipelined per node).
// WithReplicaAcks makes acquires and renewals wait for replicas (WAIT), and
// NewQuorum holds leases on a majority of independent primaries (Redlock).
// docs/deployments.md in the repository tells which gives which guarantee.
//
// # Redis keys
//
// For a name N and the prefix P ("tenure:" by default, WithKeyPrefix): P{N}
// holds the lease's token with a TTL (or a reentrant lock's owner counts),
// P{N}:fence the fencing counter (expiring at most a TTL after the lease), P{N}:queue and
// P{N}:queue:expiry the fair queue while it has waiters,
// P{N}:retired:<token> a short-lived marker of an acquire given up or a
// release done, and P{N}:released is the channel a release publishes on. The braces are a Redis Cluster hash tag: all keys of a name
// live in one slot.
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
