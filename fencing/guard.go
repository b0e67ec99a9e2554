package fencing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/lease"
)

// DefaultTable is the table the guard keeps fences in unless WithTable says
// otherwise.
const DefaultTable = "tenure_fences"

// Fenced is anything that holds a name with a fencing token: a *lease.Lease,
// a *reentrant.Lock (whose fence is that of the acquisition that took the
// name, unchanged on entering again), or a test harness's own holder.
type Fenced interface {
	// Name is the resource the fence is recorded for, unless Resource
	// renames it.
	Name() string
	// Fence is the token the write carries: greater than every fence
	// handed out before for the name.
	Fence() int64
	// Err is nil while the holder believes it holds the name.
	Err() error
	// Context is cancelled when the holder learns it no longer holds the
	// name.
	Context() context.Context
}

var (
	// ErrStale: the database has recorded a larger fence for the resource
	// than the one the transaction carried, so a later holder has written
	// since: everything was rolled back. Errors that match it also match
	// lease.ErrLost.
	ErrStale = errors.New("fencing: stale fence")
	// ErrEnded: the holder's lease had ended (lost, released, closed)
	// before the transaction began, so nothing was sent to the database; or
	// it ended during the transaction, which was rolled back. Errors that
	// match it also match lease.ErrLost, since to the resource a holder
	// whose lease ended is one that lost it.
	ErrEnded = errors.New("fencing: lease ended")
	// ErrInvalidOption: an option's value is out of range, or a table name
	// is not a plain identifier.
	ErrInvalidOption = errors.New("fencing: invalid option")
)

// ErrNotCommitted is what a guarded transaction's error wraps besides
// ErrEnded when the function returned nil but the lease had ended by the
// time of the commit, which the guard then skipped.
var ErrNotCommitted = errors.New("fencing: not committed")

// staleError is a transaction turned down by the conditional upsert.
type staleError struct {
	resource string
	fence    int64
}

func (e *staleError) Error() string {
	return fmt.Sprintf("fencing: stale fence: %q has recorded a fence larger than %d: a later holder has written; rolled back", e.resource, e.fence)
}

func (e *staleError) Is(target error) bool { return target == ErrStale || target == lease.ErrLost }

// endedError is a lease that ended before or during the transaction.
type endedError struct {
	resource string
	fence    int64
	during   bool  // false: refused before touching the database
	cause    error // the lease's Err
	err      error // what failed in the transaction, if during
}

func (e *endedError) Error() string {
	if !e.during {
		return fmt.Sprintf("fencing: %q (fence %d): the lease had ended before the transaction, nothing was sent: %v", e.resource, e.fence, e.cause)
	}
	return fmt.Sprintf("fencing: %q (fence %d): the lease ended during the transaction, rolled back: %v: %v", e.resource, e.fence, e.cause, e.err)
}

func (e *endedError) Is(target error) bool { return target == ErrEnded || target == lease.ErrLost }

func (e *endedError) Unwrap() []error {
	if e.err == nil {
		return []error{e.cause}
	}
	return []error{e.cause, e.err}
}

// Guard runs transactions that commit only if the holder's fence is at least
// the largest the database has recorded for the resource, and records it.
// It is safe for concurrent use and holds no connection of its own.
type Guard struct {
	dialect Dialect
	table   string // quoted
	txOpts  *sql.TxOptions
	upsert  string
	ddl     string
}

// Option configures a Guard.
type Option func(*Guard) error

// WithDialect sets the SQL dialect: Postgres (the default) or SQLite.
func WithDialect(d Dialect) Option {
	return func(g *Guard) error {
		if d.name == "" {
			return fmt.Errorf("%w: the zero Dialect: use fencing.Postgres or fencing.SQLite", ErrInvalidOption)
		}
		g.dialect = d
		return nil
	}
}

// WithTable sets the table the fences are kept in (DefaultTable by default):
// an identifier of letters, digits and underscores, not starting with a
// digit, at most 63 bytes, optionally qualified by a schema the same way
// ("jobs.fences"). Anything else is ErrInvalidOption: the name is written
// into SQL, quoted, and must never carry SQL of its own.
func WithTable(name string) Option {
	return func(g *Guard) error {
		q, err := quoteTable(name)
		if err != nil {
			return err
		}
		g.table = q
		return nil
	}
}

// WithTxOptions sets the options of the transactions that Tx begins on a
// database/sql connection (nil by default: the driver's default isolation
// level, READ COMMITTED on PostgreSQL). See the package documentation for
// what the isolation level changes.
func WithTxOptions(opts *sql.TxOptions) Option {
	return func(g *Guard) error {
		g.txOpts = opts
		return nil
	}
}

// New returns a Guard for the PostgreSQL dialect and DefaultTable unless
// options say otherwise. It does not touch any database: see EnsureSchema.
func New(opts ...Option) (*Guard, error) {
	g := &Guard{dialect: Postgres}
	g.table, _ = quoteTable(DefaultTable)
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o(g); err != nil {
			return nil, err
		}
	}
	g.upsert = g.dialect.upsert(g.table)
	g.ddl = g.dialect.ddl(g.table)
	return g, nil
}

// DDL returns the statement that creates the guard's table if it does not
// exist, for teams that run their own migrations.
func (g *Guard) DDL() string { return g.ddl }

// Statement returns the conditional upsert that Check runs, with the
// resource and the fence as its two parameters: it affects one row when the
// fence is at least the one recorded (or none is), and none otherwise.
func (g *Guard) Statement() string { return g.upsert }

// Execer runs a statement: *sql.DB, *sql.Conn and *sql.Tx are Execers.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// EnsureSchema creates the guard's table if it does not exist. It is
// idempotent and safe to call at every start.
func (g *Guard) EnsureSchema(ctx context.Context, db Execer) error {
	if _, err := db.ExecContext(ctx, g.ddl); err != nil {
		return fmt.Errorf("fencing: creating %s: %w", g.table, err)
	}
	return nil
}

// ExecFunc runs one statement with its arguments inside the caller's
// transaction and returns the number of rows it affected. It lets Check
// work with any driver.
type ExecFunc func(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)

// Check is the guard's core, for callers that run their own transactions
// (another driver, a test harness): run it first in the transaction, then
// the writes, then commit. It refuses without running anything if f's lease
// has ended (an error matching ErrEnded and lease.ErrLost); otherwise it runs
// the conditional upsert through exec and returns an error matching ErrStale
// and lease.ErrLost if the database has recorded a larger fence for
// f.Name(). After any error the caller must roll the transaction back.
func (g *Guard) Check(ctx context.Context, exec ExecFunc, f Fenced) error {
	if err := Ended(f); err != nil {
		return err
	}
	resource, fence := f.Name(), f.Fence()
	if resource == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalidOption)
	}
	n, err := exec(ctx, g.upsert, resource, fence)
	if err != nil {
		return fmt.Errorf("fencing: recording fence %d for %q: %w", fence, resource, err)
	}
	if n == 0 {
		return &staleError{resource: resource, fence: fence}
	}
	return nil
}

// Ended returns the error the guard gives for a holder whose lease has
// already ended (matching ErrEnded and lease.ErrLost, and wrapping f.Err()),
// or nil while f holds: adapters call it before taking a connection.
func Ended(f Fenced) error {
	if cause := f.Err(); cause != nil {
		return &endedError{resource: f.Name(), fence: f.Fence(), cause: cause}
	}
	return nil
}

// Outcome turns the error of a guarded transaction that was rolled back into
// the error the guard returns: if f's lease has ended meanwhile, an error
// matching ErrEnded and lease.ErrLost that also wraps err; otherwise err.
// Drivers' adapters (package fencing/pgxfence) call it; so may a harness that
// uses Check.
func Outcome(f Fenced, err error) error {
	if err == nil || errors.Is(err, ErrStale) || errors.Is(err, ErrEnded) {
		return err
	}
	if cause := f.Err(); cause != nil {
		return &endedError{resource: f.Name(), fence: f.Fence(), during: true, cause: cause, err: err}
	}
	return err
}

// Bind returns a context derived from ctx that is also cancelled, with the
// lease's cause, when f's context ends, so that a transaction begun under it
// is aborted by the driver as soon as the holder learns of its loss. Call
// stop when the transaction is over.
func Bind(ctx context.Context, f Fenced) (bound context.Context, stop func()) {
	lc := f.Context()
	bound, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(lc, func() { cancel(context.Cause(lc)) })
	return bound, func() {
		unhook()
		cancel(nil)
	}
}

// Beginner begins database/sql transactions: *sql.DB and *sql.Conn are
// Beginners.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Tx runs fn in one transaction on db that commits only if f's fence is at
// least the largest the database has recorded for f.Name(), and records it.
//
// The conditional upsert runs first, before fn: it locks the resource's row,
// so another guarded transaction on the same resource waits for this one to
// end. A stale fence rolls everything back and returns an error matching
// ErrStale and lease.ErrLost, without calling fn. A lease that had ended
// before Tx is refused without touching the database (ErrEnded and
// lease.ErrLost). The transaction runs under a context that is cancelled
// when f's context ends: a holder that learns of its loss during fn has its
// transaction rolled back, and gets an error matching ErrEnded and
// lease.ErrLost. An error of fn rolls back and is returned as it is (wrapped
// as ErrEnded too if the lease ended meanwhile).
//
// fn must do its writes through tx, with the context it is given.
func (g *Guard) Tx(ctx context.Context, db Beginner, f Fenced, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := Ended(f); err != nil {
		return err
	}
	ctx, stop := Bind(ctx, f)
	defer stop()
	tx, err := db.BeginTx(ctx, g.txOpts)
	if err != nil {
		return Outcome(f, fmt.Errorf("fencing: begin: %w", err))
	}
	exec := func(ctx context.Context, query string, args ...any) (int64, error) {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	if err := g.Check(ctx, exec, f); err != nil {
		_ = tx.Rollback()
		return Outcome(f, err)
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return Outcome(f, err)
	}
	if f.Err() != nil {
		_ = tx.Rollback()
		return Outcome(f, ErrNotCommitted)
	}
	if err := tx.Commit(); err != nil {
		return Outcome(f, fmt.Errorf("fencing: commit: %w", err))
	}
	return nil
}

// resourced renames a Fenced's resource.
type resourced struct {
	Fenced
	resource string
}

func (r resourced) Name() string { return r.resource }

// Resource returns f with its fence recorded under resource instead of
// f.Name(): for a lease named after a job that writes to a resource of
// another name, or several leases' names that must fence one table.
func Resource(f Fenced, resource string) Fenced { return resourced{Fenced: f, resource: resource} }
