// Package pgxfence runs fencing's guarded transactions with pgx directly,
// without database/sql: on a *pgx.Conn, a *pgxpool.Pool, or a pgx.Tx (where
// the guarded transaction is a savepoint). The guard's semantics are those
// of fencing.Guard.Tx; see package fencing.
package pgxfence

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenure-go/tenure/fencing"
)

// Beginner begins pgx transactions: *pgx.Conn, *pgxpool.Pool and pgx.Tx are
// Beginners.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Execer runs a statement: *pgx.Conn, *pgxpool.Pool and pgx.Tx are Execers.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// EnsureSchema creates g's table if it does not exist (fencing.Guard.DDL).
// The guard must use the fencing.Postgres dialect.
func EnsureSchema(ctx context.Context, g *fencing.Guard, db Execer) error {
	if _, err := db.Exec(ctx, g.DDL()); err != nil {
		return fmt.Errorf("fencing: creating the fence table: %w", err)
	}
	return nil
}

// Tx is fencing.Guard.Tx for pgx: it runs fn in one transaction on db that
// commits only if f's fence is at least the largest recorded for f.Name(),
// and records it. The check runs first; a stale fence rolls everything back
// and returns an error matching fencing.ErrStale and lease.ErrLost; a lease
// that had ended is refused without a round trip, and one that ends during
// fn rolls the transaction back (fencing.ErrEnded and lease.ErrLost).
//
// The transaction's context is cancelled when the lease's context ends. pgx
// closes a connection whose operation is cancelled (the server then rolls
// the transaction back), so a loss noticed while one of fn's statements is
// running costs that connection: on a *pgx.Conn the caller must reconnect;
// a *pgxpool.Pool discards it. A loss noticed between statements is rolled
// back on a connection that stays usable.
func Tx(ctx context.Context, g *fencing.Guard, db Beginner, f fencing.Fenced, fn func(ctx context.Context, tx pgx.Tx) error) error {
	exec := func(tx pgx.Tx) fencing.ExecFunc {
		return func(ctx context.Context, query string, args ...any) (int64, error) {
			tag, err := tx.Exec(ctx, query, args...)
			return tag.RowsAffected(), err
		}
	}
	// Refuse an ended lease before taking a connection.
	if err := fencing.Ended(f); err != nil {
		return err
	}
	ctx, stop := fencing.Bind(ctx, f)
	defer stop()
	tx, err := db.Begin(ctx)
	if err != nil {
		return fencing.Outcome(f, fmt.Errorf("fencing: begin: %w", err))
	}
	// Rollback after Commit is a no-op; it uses a fresh context so that a
	// cancelled one still returns the connection clean.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := g.Check(ctx, exec(tx), f); err != nil {
		return fencing.Outcome(f, err)
	}
	if err := fn(ctx, tx); err != nil {
		return fencing.Outcome(f, err)
	}
	// A lease that ended during fn is rolled back rather than committed
	// with a cancelled context, on which pgx would close the connection.
	if f.Err() != nil {
		return fencing.Outcome(f, fencing.ErrNotCommitted)
	}
	if err := tx.Commit(ctx); err != nil {
		return fencing.Outcome(f, fmt.Errorf("fencing: commit: %w", err))
	}
	return nil
}
