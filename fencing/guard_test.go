package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
)

// Both kinds of holder this repository hands out are Fenced.
var (
	_ fencing.Fenced = (*lease.Lease)(nil)
	_ fencing.Fenced = (*reentrant.Lock)(nil)
)

// TestStalledHolder is the proof: holder A sleeps through its lease
// (no renewal, as in a GC pause), B acquires the name and commits, then A
// wakes and tries to commit. A's transaction is rolled back, B's rows are
// intact, and A gets an error matching lease.ErrLost, whether A wakes with
// its watchdog having noticed (the lease's Err is set: refused before the
// database) or, as after a pause of the whole process, still believing in
// the lease (the database's recorded fence turns it down).
func TestStalledHolder(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			db, g := b.prepare(t)
			mA := newManager(t, lease.WithTTL(500*time.Millisecond))
			mB := newManager(t)

			a, err := mA.Acquire(ctx, "report", lease.WithAutoRenew(false))
			if err != nil {
				t.Fatal(err)
			}
			asleep := frozen(a) // what A believes when it wakes
			// A sleeps; its lease runs out on the server and B gets the name.
			b2, err := mB.Acquire(ctx, "report")
			if err != nil {
				t.Fatal(err)
			}
			defer b2.Release(ctx)
			if b2.Fence() <= a.Fence() {
				t.Fatalf("B's fence %d not above A's %d", b2.Fence(), a.Fence())
			}
			if err := g.Tx(ctx, db, b2, insertResult("B")); err != nil {
				t.Fatalf("B's guarded transaction: %v", err)
			}

			// A wakes still believing in its lease: the database decides.
			var ran atomic.Bool
			err = g.Tx(ctx, db, asleep, func(ctx context.Context, tx *sql.Tx) error {
				ran.Store(true)
				return insertResult("A")(ctx, tx)
			})
			if !errors.Is(err, fencing.ErrStale) || !errors.Is(err, lease.ErrLost) {
				t.Fatalf("A's transaction after B's: %v, want ErrStale and lease.ErrLost", err)
			}
			if ran.Load() {
				t.Fatal("A's function ran although its fence was stale")
			}
			if got := rows(t, db); len(got) != 1 || got[0] != "B" {
				t.Fatalf("results = %v, want [B]", got)
			}
			if got := recorded(t, db, fencing.DefaultTable, "report"); got != b2.Fence() {
				t.Fatalf("recorded fence %d, want B's %d", got, b2.Fence())
			}

			// A's own lease, once its context has caught up: refused
			// before the database is touched.
			waitFor(t, "A's lease to end", func() bool { return a.Err() != nil })
			err = g.Tx(ctx, mustNotBegin{t}, a, insertResult("A"))
			if !errors.Is(err, fencing.ErrEnded) || !errors.Is(err, lease.ErrLost) {
				t.Fatalf("A's transaction with its ended lease: %v, want ErrEnded and lease.ErrLost", err)
			}
		})
	}
}

// TestStalledInsideTransaction: A stalls inside its guarded transaction,
// holding the resource's row lock, until its lease is lost. The loss cancels
// the transaction's context, so the driver rolls it back and B, waiting
// behind the lock, commits; A's commit then fails with lease.ErrLost and
// none of A's rows is left.
func TestStalledInsideTransaction(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			db, g := b.prepare(t)
			mA := newManager(t, lease.WithTTL(500*time.Millisecond))
			mB := newManager(t)
			a, err := mA.Acquire(ctx, "report", lease.WithAutoRenew(false))
			if err != nil {
				t.Fatal(err)
			}
			inside := make(chan struct{})
			wake := make(chan struct{})
			aDone := make(chan error, 1)
			go func() {
				aDone <- g.Tx(ctx, db, a, func(ctx context.Context, tx *sql.Tx) error {
					if err := insertResult("A")(ctx, tx); err != nil {
						return err
					}
					close(inside)
					<-wake // A sleeps through its lease
					return nil
				})
			}()
			<-inside
			b2, err := mB.Acquire(ctx, "report")
			if err != nil {
				t.Fatal(err)
			}
			defer b2.Release(ctx)
			bDone := make(chan error, 1)
			go func() { bDone <- g.Tx(ctx, db, b2, insertResult("B")) }()
			select {
			case err := <-bDone:
				if err != nil {
					t.Fatalf("B's guarded transaction: %v", err)
				}
			case <-time.After(time.Minute): // a bound, not a timing claim
				close(wake)
				t.Fatalf("B still waits behind A's transaction a minute after A's lease ended (A's lease: %v)", a.Err())
			}
			close(wake)
			err = <-aDone
			if !errors.Is(err, fencing.ErrEnded) || !errors.Is(err, lease.ErrLost) {
				t.Fatalf("A's commit after its loss: %v, want ErrEnded and lease.ErrLost", err)
			}
			if got := rows(t, db); len(got) != 1 || got[0] != "B" {
				t.Fatalf("results = %v, want [B]", got)
			}
		})
	}
}

// mustNotBegin fails the test if the guard begins a transaction.
type mustNotBegin struct{ t *testing.T }

func (m mustNotBegin) BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error) {
	m.t.Error("the guard began a transaction for a lease that had ended")
	return nil, errors.New("must not begin")
}

// TestConcurrentGuardedTransactions: two guarded transactions on one
// resource at once. The first takes the row lock with its upsert and holds
// it; the second waits behind it (observed on the server), then compares its
// fence with the one just committed. READ COMMITTED, PostgreSQL's default.
func TestConcurrentGuardedTransactions(t *testing.T) {
	for _, tc := range []struct {
		name         string
		first, later int64
		wantLater    error // nil: commits
		seeded       bool  // the resource's row exists before
		repeatable   bool  // REPEATABLE READ instead of READ COMMITTED
		wantSQLState string
	}{
		{"larger first, new row", 10, 5, fencing.ErrStale, false, false, ""},
		{"larger first, existing row", 10, 5, fencing.ErrStale, true, false, ""},
		{"smaller first", 5, 10, nil, true, false, ""},
		{"smaller first, new row", 5, 10, nil, false, false, ""},
		// Under REPEATABLE READ the transaction that waited cannot see the
		// row committed meanwhile: a serialization failure, also rolled back.
		{"larger first, repeatable read", 10, 5, nil, true, true, "40001"},
		{"smaller first, repeatable read", 5, 10, nil, true, true, "40001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := openPostgres(t)
			var opts []fencing.Option
			if tc.repeatable {
				opts = append(opts, fencing.WithTxOptions(&sql.TxOptions{Isolation: sql.LevelRepeatableRead}))
			}
			g := newGuard(t, opts...)
			if err := g.EnsureSchema(ctx, db); err != nil {
				t.Fatal(err)
			}
			createResults(t, db, fencing.Postgres)
			if tc.seeded {
				if err := g.Tx(ctx, db, holder{name: "r", fence: 1}, insertResult("seed")); err != nil {
					t.Fatal(err)
				}
			}
			inside := make(chan struct{})
			release := make(chan struct{})
			firstDone := make(chan error, 1)
			go func() {
				firstDone <- g.Tx(ctx, db, holder{name: "r", fence: tc.first}, func(ctx context.Context, tx *sql.Tx) error {
					close(inside)
					<-release
					return insertResult("first")(ctx, tx)
				})
			}()
			<-inside
			var laterRan atomic.Bool
			laterDone := make(chan error, 1)
			go func() {
				laterDone <- g.Tx(ctx, db, holder{name: "r", fence: tc.later}, func(ctx context.Context, tx *sql.Tx) error {
					laterRan.Store(true)
					return insertResult("later")(ctx, tx)
				})
			}()
			// The later transaction's upsert waits for the first's row lock.
			waitFor(t, "the later transaction to wait for a lock", func() bool {
				var n int
				err := db.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				return n == 1
			})
			if laterRan.Load() {
				t.Fatal("the later transaction's function ran while the first held the row")
			}
			close(release)
			if err := <-firstDone; err != nil {
				t.Fatalf("first: %v", err)
			}
			err := <-laterDone
			want := []string{"first", "later"}
			if tc.wantSQLState != "" {
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != tc.wantSQLState {
					t.Fatalf("later: %v, want SQLSTATE %s", err, tc.wantSQLState)
				}
				want = want[:1]
			} else if tc.wantLater != nil {
				if !errors.Is(err, tc.wantLater) || !errors.Is(err, lease.ErrLost) {
					t.Fatalf("later: %v, want %v", err, tc.wantLater)
				}
				want = want[:1]
			} else if err != nil {
				t.Fatalf("later: %v", err)
			}
			got := rows(t, db)
			if tc.seeded {
				got = got[1:]
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("results %v, want %v", got, want)
			}
			wantFence := max(tc.first, tc.later)
			if tc.wantSQLState != "" {
				wantFence = tc.first
			}
			if r := recorded(t, db, fencing.DefaultTable, "r"); r != wantFence {
				t.Fatalf("recorded %d, want %d", r, wantFence)
			}
		})
	}
}

// TestEqualFenceAccepted: the same holder commits twice, and a reentrant
// lock's two entries (one fence) both commit.
func TestEqualFenceAccepted(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			db, g := b.prepare(t)
			m := newManager(t)
			l, err := m.Acquire(ctx, "lease")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			for _, w := range []string{"l1", "l2"} {
				if err := g.Tx(ctx, db, l, insertResult(w)); err != nil {
					t.Fatalf("%s: %v", w, err)
				}
			}
			locker := reentrant.New(m)
			outer, err := locker.Lock(ctx, "lock")
			if err != nil {
				t.Fatal(err)
			}
			defer outer.Unlock(ctx)
			inner, err := locker.Lock(outer.Context(), "lock")
			if err != nil {
				t.Fatal(err)
			}
			defer inner.Unlock(ctx)
			if inner.Fence() != outer.Fence() {
				t.Fatalf("re-entry changed the fence: %d, %d", outer.Fence(), inner.Fence())
			}
			if err := g.Tx(ctx, db, outer, insertResult("outer")); err != nil {
				t.Fatal(err)
			}
			if err := g.Tx(ctx, db, inner, insertResult("inner")); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rows(t, db), ","); got != "l1,l2,outer,inner" {
				t.Fatalf("results %s", got)
			}
			if r := recorded(t, db, fencing.DefaultTable, "lock"); r != outer.Fence() {
				t.Fatalf("recorded %d for the lock, want %d", r, outer.Fence())
			}
		})
	}
}

// TestFunctionErrorRollsBack: an error of the function rolls back its
// writes and the fence's record, and is returned as it is.
func TestFunctionErrorRollsBack(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			db, g := b.prepare(t)
			boom := errors.New("boom")
			err := g.Tx(ctx, db, holder{name: "r", fence: 7}, func(ctx context.Context, tx *sql.Tx) error {
				if err := insertResult("x")(ctx, tx); err != nil {
					return err
				}
				return boom
			})
			if err != boom {
				t.Fatalf("Tx = %v, want the function's error as it is", err)
			}
			if got := rows(t, db); len(got) != 0 {
				t.Fatalf("results %v after a rollback", got)
			}
			if r := recorded(t, db, fencing.DefaultTable, "r"); r != 0 {
				t.Fatalf("fence %d recorded by a rolled-back transaction", r)
			}
		})
	}
}

// TestResource: a fence recorded under another name than the lease's.
func TestResource(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	g := newGuard(t, fencing.WithDialect(fencing.SQLite))
	if err := g.EnsureSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	createResults(t, db, fencing.SQLite)
	h := holder{name: "job-1", fence: 3}
	if err := g.Tx(ctx, db, fencing.Resource(h, "orders"), insertResult("x")); err != nil {
		t.Fatal(err)
	}
	if r := recorded(t, db, fencing.DefaultTable, "orders"); r != 3 {
		t.Fatalf("recorded %d under orders, want 3", r)
	}
	if r := recorded(t, db, fencing.DefaultTable, "job-1"); r != 0 {
		t.Fatalf("recorded %d under the lease's own name", r)
	}
	err := g.Tx(ctx, db, fencing.Resource(holder{name: "job-2", fence: 2}, "orders"), insertResult("y"))
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("a smaller fence on the same resource: %v", err)
	}
	if err := g.Tx(ctx, db, fencing.Resource(h, ""), insertResult("z")); !errors.Is(err, fencing.ErrInvalidOption) {
		t.Fatalf("empty resource: %v", err)
	}
}

// TestEndedLeaseRefused: a lease released before the transaction is refused
// without a transaction, with an error that also wraps its own cause.
func TestEndedLeaseRefused(t *testing.T) {
	ctx := context.Background()
	g := newGuard(t)
	m := newManager(t)
	l, err := m.Acquire(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	err = g.Tx(ctx, mustNotBegin{t}, l, insertResult("x"))
	if !errors.Is(err, fencing.ErrEnded) || !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrReleased) {
		t.Fatalf("Tx with a released lease: %v, want ErrEnded, lease.ErrLost and lease.ErrReleased", err)
	}
}

// TestEnsureSchema: idempotent, on the default table, another one and a
// schema-qualified one, and the DDL is the documented statement.
func TestEnsureSchema(t *testing.T) {
	ctx := context.Background()
	db := openPostgres(t)
	if _, err := db.Exec("CREATE SCHEMA jobs"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{fencing.DefaultTable, "Other_Fences", "jobs.fences"} {
		g := newGuard(t, fencing.WithTable(table))
		for range 2 {
			if err := g.EnsureSchema(ctx, db); err != nil {
				t.Fatalf("%s: %v", table, err)
			}
		}
		if err := g.Tx(ctx, db, holder{name: "r", fence: 2}, func(context.Context, *sql.Tx) error { return nil }); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if err := g.Tx(ctx, db, holder{name: "r", fence: 1}, func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("%s: stale fence: %v", table, err)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_name IN ('tenure_fences', 'Other_Fences', 'fences')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d tables, want 3", n)
	}
	const pgDDL = `CREATE TABLE IF NOT EXISTS "tenure_fences" (resource text PRIMARY KEY, fence bigint NOT NULL)`
	if got := newGuard(t).DDL(); got != pgDDL {
		t.Fatalf("DDL %q, want the documented %q", got, pgDDL)
	}
	const liteDDL = `CREATE TABLE IF NOT EXISTS "tenure_fences" (resource TEXT PRIMARY KEY NOT NULL, fence INTEGER NOT NULL)`
	if got := newGuard(t, fencing.WithDialect(fencing.SQLite)).DDL(); got != liteDDL {
		t.Fatalf("DDL %q, want the documented %q", got, liteDDL)
	}
}

func TestOptionsValidated(t *testing.T) {
	for _, name := range []string{"", "a b", `x"; DROP TABLE results; --`, "1abc", "a.b.c", ".a", "a.", "ta-ble", "é", strings.Repeat("a", 64)} {
		if _, err := fencing.New(fencing.WithTable(name)); !errors.Is(err, fencing.ErrInvalidOption) {
			t.Errorf("WithTable(%q): %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := fencing.New(fencing.WithDialect(fencing.Dialect{})); !errors.Is(err, fencing.ErrInvalidOption) {
		t.Errorf("the zero Dialect: %v", err)
	}
	if _, err := fencing.New(nil); !errors.Is(err, fencing.ErrInvalidOption) {
		t.Errorf("nil Option: %v", err)
	}
	if _, err := fencing.New(fencing.WithTable(strings.Repeat("a", 63) + "." + strings.Repeat("b", 63))); err != nil {
		t.Errorf("63-byte parts: %v", err)
	}
}
