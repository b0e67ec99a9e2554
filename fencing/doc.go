// Package fencing makes a SQL database reject the writes of a holder whose
// lease has passed to someone else: the resource side of fencing tokens.
//
// A fencing token protects nothing until the resource checks it. A Guard runs
// the caller's writes in one transaction that first records the holder's
// fence for the resource in a small table, with a conditional upsert that
// succeeds only if no larger fence is recorded there. A holder that paused
// past its lease (a long GC, a frozen VM) and wakes up still believing in it
// finds the next holder's larger fence recorded: its transaction is rolled
// back and it gets an error matching ErrStale and lease.ErrLost.
//
//	g, err := fencing.New() // PostgreSQL, table tenure_fences
//	err = g.EnsureSchema(ctx, db)
//	l, err := m.Acquire(ctx, "nightly-report")
//	err = g.Tx(ctx, db, l, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "INSERT INTO reports ...")
//		return err
//	})
//	if errors.Is(err, lease.ErrLost) { ... } // nothing was written
//
// Anything with a name, a fence, an error and a context is Fenced: a
// *lease.Lease, a semaphore's permit or a read-write lock (both
// *lease.Lease; a permit's fences increase in the order permits were
// granted, so on one resource a permit is refused once a later one has
// committed: TestSemaphorePermits), a *reentrant.Lock (its fence is that of
// the acquisition that took the name, so re-entering fences the same way). The fence is recorded
// under the lease's name; Resource records it under another. Package
// fencing/pgxfence does the same with pgx directly, and Check lets any
// other driver, or a test harness, run the check in its own transaction.
//
// # What is guaranteed
//
// For one resource, the guarded transactions that commit do so in
// non-decreasing order of fence. Once a holder with fence F has committed,
// no guarded transaction with a fence below F commits after it. A fence
// equal to the recorded one is accepted: the same holder may commit many
// times, and a reentrant lock's entries share a fence. Writes to the same
// data made outside the guard, or guarded under another resource name, are
// not protected.
//
// # Where the check happens, and isolation
//
// The conditional upsert is the transaction's first statement. On
// PostgreSQL, INSERT ... ON CONFLICT DO UPDATE takes the resource's row lock
// even when its condition is false, and keeps it until the transaction ends,
// so a concurrent guarded transaction on the same resource waits behind it
// and then compares its fence with the one just committed (READ COMMITTED,
// PostgreSQL's default, re-reads the latest committed row after the wait).
// READ COMMITTED is therefore enough; under REPEATABLE READ or SERIALIZABLE
// the transaction that waited fails instead with a serialization error
// (SQLSTATE 40001), which is also a rollback but not ErrStale. Checking
// first means a stale holder's writes never run, and a holder that takes the
// row lock first commits before any later holder's writes, in the database's
// order. On SQLite the first write takes the database's write lock, which
// serialises guarded transactions the same way.
//
// # When the lease ends
//
// A lease that has already ended (Err is not nil) is refused before the
// database is touched, with an error matching ErrEnded and lease.ErrLost.
// Tx and pgxfence.Tx run the transaction under a context that is cancelled
// when the lease's context ends, so a holder that learns of its loss during
// its function has the transaction rolled back by the driver (ErrEnded and
// lease.ErrLost). A holder that cannot learn of it — its process is paused —
// is judged by the conditional upsert alone: if a later holder's fence was
// committed first, the stale transaction is rolled back (ErrStale); if the
// paused holder took the row lock first, the later holder waits, and the
// paused holder's commit comes first in the database's order, which is
// exactly what fencing allows.
//
// # Schema
//
// EnsureSchema creates the table if it does not exist. Teams that run their
// own migrations create it themselves; DDL returns the statement, which is,
// for PostgreSQL:
//
//	CREATE TABLE IF NOT EXISTS "tenure_fences" (resource text PRIMARY KEY, fence bigint NOT NULL)
//
// and for SQLite:
//
//	CREATE TABLE IF NOT EXISTS "tenure_fences" (resource TEXT PRIMARY KEY NOT NULL, fence INTEGER NOT NULL)
//
// The guard inserts one row per resource and never deletes one. Deleting a
// resource's row forgets its largest fence, after which a holder paused since
// before could commit: delete only the rows of resources whose every past
// holder has stopped.
//
// # Dialects
//
// Postgres and SQLite are tested against real databases (a postgres server
// started by the tests, and modernc.org/sqlite). MySQL is not supported: no
// MySQL server is tested here, and its INSERT ... ON DUPLICATE KEY UPDATE
// counts affected rows in its own way, which would need a dialect and tests of
// its own.
package fencing
