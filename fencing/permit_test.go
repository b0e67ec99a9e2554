package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/pgtest"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/semaphore"
)

// A semaphore's permits are leases and fence the same way: their fences
// increase in the order they were granted, so on one resource a permit's
// commit is refused once a permit granted after it has committed.
func TestSemaphorePermits(t *testing.T) {
	db, err := sql.Open("pgx", pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	g, err := fencing.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.EnsureSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	permits := semaphore.New(newManager(t))
	older, err := permits.Acquire(ctx, "builders", 2)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := permits.Acquire(ctx, "builders", 2)
	if err != nil {
		t.Fatal(err)
	}
	write := func(l *lease.Lease) error {
		return g.Tx(ctx, db, fencing.Resource(l, "report"), func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `SELECT 1`)
			return err
		})
	}
	if err := write(newer); err != nil {
		t.Fatal(err)
	}
	if err := write(older); !errors.Is(err, fencing.ErrStale) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the older permit's commit after the newer one's: %v", err)
	}
	if err := write(newer); err != nil {
		t.Fatalf("the newer permit again: %v", err)
	}
}
