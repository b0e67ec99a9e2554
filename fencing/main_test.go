package fencing_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/pgtest"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// redisAddr is the address of the test binary's redis-server, for the leases
// of the tests and the runnable examples.
var redisAddr string

func TestMain(m *testing.M) {
	srv, err := redistest.StartServer(redistest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisAddr = srv.Addr()
	code := pgtest.Run(m) // stops the shared PostgreSQL, if a test started it
	_ = srv.Stop()
	if code == 0 {
		if err := redistest.Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newManager returns a lease.Manager on the test Redis, closed at cleanup.
func newManager(t testing.TB, opts ...lease.Option) *lease.Manager {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	m, err := lease.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		_ = client.Close()
	})
	return m
}

// backend is one database the guard is tested on through database/sql.
type backend struct {
	name    string
	dialect fencing.Dialect
	open    func(t testing.TB) *sql.DB
}

var backends = []backend{
	{"postgres", fencing.Postgres, openPostgres},
	{"sqlite", fencing.SQLite, openSQLite},
}

// openPostgres returns a database/sql handle (pgx's stdlib driver) on a
// fresh database of the shared test server.
func openPostgres(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// openSQLite returns a handle on a fresh SQLite file: WAL, a busy timeout so
// that writers wait for each other, and BEGIN IMMEDIATE.
func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// pgxConn returns a pgx connection to a fresh database of the shared server.
func pgxConn(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func newGuard(t testing.TB, opts ...fencing.Option) *fencing.Guard {
	t.Helper()
	g, err := fencing.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// holder is a Fenced whose state the test sets: the view of a holder whose
// whole process, watchdog included, was paused, and who wakes up still
// believing in its lease (Err nil, context not done).
type holder struct {
	name  string
	fence int64
	err   error
	ctx   context.Context
}

func (h holder) Name() string { return h.name }
func (h holder) Fence() int64 { return h.fence }
func (h holder) Err() error   { return h.err }
func (h holder) Context() context.Context {
	if h.ctx == nil {
		return context.Background()
	}
	return h.ctx
}

// frozen returns what l's holder sees of it right after a process pause,
// before its watchdog has run: the same name and fence, still held.
func frozen(l fencing.Fenced) holder { return holder{name: l.Name(), fence: l.Fence()} }

// rows returns the writers recorded in table results, in insertion order.
func rows(t testing.TB, db *sql.DB) []string {
	t.Helper()
	r, err := db.Query("SELECT writer FROM results ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for r.Next() {
		var w string
		if err := r.Scan(&w); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// recorded returns the fence recorded for resource, or 0 if none.
func recorded(t testing.TB, db *sql.DB, table, resource string) int64 {
	t.Helper()
	var fence int64
	err := db.QueryRow("SELECT fence FROM " + table + " WHERE resource = '" + resource + "'").Scan(&fence)
	if err == sql.ErrNoRows {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fence
}

// createResults creates the table the tests' holders write their results to.
// prepare opens a fresh database of b with the guard's table (EnsureSchema)
// and the tests' results table, and returns it with a guard of b's dialect.
func (b backend) prepare(t testing.TB) (*sql.DB, *fencing.Guard) {
	t.Helper()
	db := b.open(t)
	g := newGuard(t, fencing.WithDialect(b.dialect))
	if err := g.EnsureSchema(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	createResults(t, db, b.dialect)
	return db, g
}

func createResults(t testing.TB, db *sql.DB, d fencing.Dialect) {
	t.Helper()
	ddl := "CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, writer TEXT NOT NULL)"
	if d.String() == fencing.Postgres.String() {
		ddl = "CREATE TABLE results (id bigserial PRIMARY KEY, writer text NOT NULL)"
	}
	if _, err := db.Exec(ddl); err != nil {
		t.Fatal(err)
	}
}

func insertResult(writer string) func(ctx context.Context, tx *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO results (writer) VALUES ('"+writer+"')")
		return err
	}
}

// waitFor polls cond until it holds, failing the test after a generous bound
// (the CI machine is small and busy: the bound is not a timing claim).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
