package pgxfence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/pgtest"
	"github.com/tenure-go/tenure/fencing/pgxfence"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

var redisAddr string

func TestMain(m *testing.M) {
	srv, err := redistest.StartServer(redistest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisAddr = srv.Addr()
	code := pgtest.Run(m)
	_ = srv.Stop()
	if code == 0 {
		if err := redistest.Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// frozen is what a holder whose whole process was paused believes when it
// wakes, before its watchdog has run: the name and fence, still held.
type frozen struct {
	name  string
	fence int64
}

func (f frozen) Name() string             { return f.name }
func (f frozen) Fence() int64             { return f.fence }
func (f frozen) Err() error               { return nil }
func (f frozen) Context() context.Context { return context.Background() }

func setup(t *testing.T) (*pgx.Conn, *fencing.Guard, *lease.Manager) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	g, err := fencing.New()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := pgxfence.EnsureSchema(ctx, g, conn); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE results (id bigserial PRIMARY KEY, writer text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	m, err := lease.New(client, lease.WithTTL(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		_ = client.Close()
	})
	return conn, g, m
}

func insert(writer string) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO results (writer) VALUES ($1)", writer)
		return err
	}
}

func results(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT writer FROM results ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(ws, ",")
}

// TestStalledHolder: A sleeps through its lease, B acquires and commits, A
// wakes still believing in its lease and is turned down by the database;
// with its lease's own view, A is refused before the database.
func TestStalledHolder(t *testing.T) {
	ctx := context.Background()
	conn, g, m := setup(t)
	a, err := m.Acquire(ctx, "report", lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	asleep := frozen{name: a.Name(), fence: a.Fence()}
	b, err := m.Acquire(ctx, "report") // waits for A's lease to run out
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if err := pgxfence.Tx(ctx, g, conn, b, insert("B")); err != nil {
		t.Fatalf("B: %v", err)
	}
	var ran atomic.Bool
	err = pgxfence.Tx(ctx, g, conn, asleep, func(ctx context.Context, tx pgx.Tx) error {
		ran.Store(true)
		return insert("A")(ctx, tx)
	})
	if !errors.Is(err, fencing.ErrStale) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("A after B: %v, want ErrStale and lease.ErrLost", err)
	}
	if ran.Load() {
		t.Fatal("A's function ran with a stale fence")
	}
	if got := results(t, conn); got != "B" {
		t.Fatalf("results %q, want B", got)
	}
	if a.Err() == nil {
		<-a.Done()
	}
	if err := pgxfence.Tx(ctx, g, conn, a, insert("A")); !errors.Is(err, fencing.ErrEnded) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("A with its ended lease: %v, want ErrEnded and lease.ErrLost", err)
	}
	// The connection is still usable after the rollbacks.
	if err := pgxfence.Tx(ctx, g, conn, b, insert("B2")); err != nil {
		t.Fatalf("B again: %v", err)
	}
	if got := results(t, conn); got != "B,B2" {
		t.Fatalf("results %q, want B,B2", got)
	}
}

// TestLostDuringFunction: the lease ends while the function runs; the
// transaction is rolled back and the error matches ErrEnded and ErrLost.
func TestLostDuringFunction(t *testing.T) {
	ctx := context.Background()
	conn, g, m := setup(t)
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	err = pgxfence.Tx(ctx, g, conn, l, func(ctx context.Context, tx pgx.Tx) error {
		if err := insert("x")(ctx, tx); err != nil {
			return err
		}
		if err := l.Release(context.Background()); err != nil {
			return err
		}
		<-ctx.Done() // the guard's context follows the lease's
		return nil
	})
	if !errors.Is(err, fencing.ErrEnded) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Tx whose lease ended inside: %v", err)
	}
	if got := results(t, conn); got != "" {
		t.Fatalf("results %q after a rollback", got)
	}
}

// TestFunctionError: the function's error comes back as it is, nothing is
// written and no fence recorded.
func TestFunctionError(t *testing.T) {
	ctx := context.Background()
	conn, g, _ := setup(t)
	boom := errors.New("boom")
	err := pgxfence.Tx(ctx, g, conn, frozen{name: "r", fence: 9}, func(ctx context.Context, tx pgx.Tx) error {
		if err := insert("x")(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Tx = %v, want boom", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM tenure_fences").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 || results(t, conn) != "" {
		t.Fatalf("%d fences and results %q after a rollback", n, results(t, conn))
	}
}
