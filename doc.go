// Package tenure is the root of tenure's module and holds no code: it
// names the packages to import. tenure holds auto-renewing leases on Redis,
// each with a context cancelled before the server could let another holder
// in, and builds locks and elections on them.
//
//   - [github.com/tenure-go/tenure/lease]: the API: Manager, Lease, Set
//     (several names at once), options, errors, hooks. Start here.
//   - [github.com/tenure-go/tenure/lease/leasetest]: in-memory managers for
//     a program's unit tests, with losses on demand; no Redis needed.
//   - [github.com/tenure-go/tenure/reentrant]: reentrant locks, the owner
//     carried by the context.
//   - [github.com/tenure-go/tenure/semaphore]: counting semaphores: at most
//     n holders of a name, each permit a lease.
//   - [github.com/tenure-go/tenure/rwlock]: read-write locks, writers first,
//     with Downgrade.
//   - [github.com/tenure-go/tenure/redisson]: Redisson's locks (RLock,
//     RFencedLock, RReadWriteLock) on their own keys, shared with Java
//     services.
//   - [github.com/tenure-go/tenure/election]: leader election on a lease,
//     with the leader's identity and term, observers and a health check.
//   - [github.com/tenure-go/tenure/inspect]: a read-only view of who holds
//     a name.
//   - [github.com/tenure-go/tenure/tracing]: OpenTelemetry spans and
//     metrics for lease's hooks.
//   - [github.com/tenure-go/tenure/watchdog]: the renewal schedule and
//     local deadlines under package lease, usable on its own.
//   - github.com/tenure-go/tenure/fencing (a module of its own): fencing
//     a database with a lease's fence.
//   - github.com/tenure-go/tenure/cmd/tenure (a module of its own): the
//     tenure command.
//
// docs/design.md in the repository states what is promised and how.
package tenure
