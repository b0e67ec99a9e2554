package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
)

// A job writes its result under a lease; a holder that wakes up after its
// lease has passed to another is turned down by the database. SQLite in
// memory stands in for the database here so that the example runs anywhere
// (the Redis is the test binary's own); with PostgreSQL, open the database
// with pgx's stdlib driver and leave the dialect at its default.
func ExampleGuard_Tx() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection: one in-memory database
	if _, err := db.Exec("CREATE TABLE reports (day TEXT PRIMARY KEY, total INTEGER)"); err != nil {
		panic(err)
	}

	g, err := fencing.New(fencing.WithDialect(fencing.SQLite))
	if err != nil {
		panic(err)
	}
	if err := g.EnsureSchema(ctx, db); err != nil {
		panic(err)
	}
	write := func(total int) func(ctx context.Context, tx *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO reports VALUES ('2026-11-23', ?)", total)
			return err
		}
	}

	first, err := m.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	// The first holder pauses here past its lease; meanwhile the lease
	// passes to a second holder (released here, to keep the example short),
	// which writes its result.
	paused := stillBelieves{first}
	_ = first.Release(ctx)
	second, err := m.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	defer second.Release(ctx)
	fmt.Println("second holder:", g.Tx(ctx, db, second, write(42)))

	// The first holder wakes, still believing in its lease.
	err = g.Tx(ctx, db, paused, write(41))
	fmt.Println("first holder, stale:", errors.Is(err, fencing.ErrStale), "lost:", errors.Is(err, lease.ErrLost))

	var total int
	_ = db.QueryRow("SELECT total FROM reports").Scan(&total)
	fmt.Println("total:", total)
	// Output:
	// second holder: <nil>
	// first holder, stale: true lost: true
	// total: 42
}

// stillBelieves is a lease as seen by a holder whose process was paused:
// it has not yet learnt that the lease ended.
type stillBelieves struct{ *lease.Lease }

func (stillBelieves) Err() error               { return nil }
func (stillBelieves) Context() context.Context { return context.Background() }
