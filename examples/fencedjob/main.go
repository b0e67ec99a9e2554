// Command fencedjob is a long job that writes its results to PostgreSQL under
// a lease, with the writes fenced: a worker that paused past its lease and
// wakes up believing in it cannot overwrite the results of the worker after
// it (package fencing).
//
// Worker A takes the lease on "nightly-totals" and starts computing, then
// pauses — as a stop-the-world GC or a frozen VM would — for longer than its
// lease. Its lease runs out, worker B takes the name with a larger fence,
// computes and commits its totals through the guard. Then A wakes up,
// finishes, and tries to commit: the database has recorded B's fence, so A's
// transaction is rolled back and A gets an error matching lease.ErrLost.
// B's row is what is left.
//
// A real pause stops A's watchdog too, so A wakes up still believing in its
// lease for a moment. The demo cannot stop its own process, so it shows that
// moment by giving the guard what A believed before the pause (its name and
// fence, still held), then what A's lease says once its watchdog has caught
// up (ended: refused before the database).
//
// It needs a PostgreSQL, found through DATABASE_URL, for example:
//
//	docker run --rm -d -e POSTGRES_HOST_AUTH_METHOD=trust -p 127.0.0.1:5432:5432 postgres
//	DATABASE_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' go run ./examples/fencedjob
//
// or Debian's postgresql package (apt-get install postgresql; then
// `sudo -u postgres createuser -s $USER` and DATABASE_URL=postgres:///postgres).
// Without DATABASE_URL it says so and exits 2. Redis is embedded (miniredis)
// unless REDIS_URL is set. It creates the tables tenure_fences and
// fencedjob_totals if they do not exist, and writes rows of its own run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/pgxfence"
	"github.com/tenure-go/tenure/lease"
)

const (
	ttl   = time.Second // short, so that the pause outlives it quickly
	steps = 3
)

// errNoDatabase is returned when DATABASE_URL is unset.
var errNoDatabase = errors.New(`DATABASE_URL is not set: fencedjob needs a PostgreSQL. For example:
  docker run --rm -d -e POSTGRES_HOST_AUTH_METHOD=trust -p 127.0.0.1:5432:5432 postgres
  DATABASE_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' go run ./examples/fencedjob
or on Debian: apt-get install postgresql; sudo -u postgres createuser -s $USER;
  DATABASE_URL=postgres:///postgres go run ./examples/fencedjob`)

func main() {
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" { // exit 2: the demo cannot run as invoked
		fmt.Fprintln(os.Stderr, "fencedjob:", errNoDatabase)
		os.Exit(2)
	}
	examplecmd.Main("fencedjob", func(ctx context.Context, out, logOut io.Writer) error {
		return run(ctx, dbURL, out, logOut)
	})
}

// run is the whole demo: the narrative goes to out, the library's log to logOut.
func run(ctx context.Context, dbURL string, out, logOut io.Writer) error {
	if dbURL == "" {
		return errNoDatabase
	}
	say := examplecmd.Narrator(out, time.Now(), time.Millisecond)
	st, err := setUp(ctx, dbURL, say, logOut) // PostgreSQL, Redis, a manager, the guard and the tables
	if err != nil {
		return err
	}
	defer st.close()
	name := "nightly-totals" + st.suffix + "-" + st.runID // a resource of this run's own

	// Worker A: takes the lease and starts. Its watchdog will not renew:
	// that is what a pause of its whole process does to it.
	a, err := st.m.Acquire(ctx, name, lease.WithAutoRenew(false))
	if err != nil {
		return err
	}
	say("worker A: acquired %q, fence %d; computing", name, a.Fence())
	believed := heldView{name: a.Name(), fence: a.Fence()} // what A believes, and will on waking
	totalA := compute(ctx, "A", say)
	say("worker A: paused (a long GC, a frozen VM) for longer than its %v lease...", ttl)

	// Worker B: waits for the name, which A's lease frees by running out.
	b, err := st.m.Acquire(ctx, name)
	if err != nil {
		return err
	}
	defer b.Release(context.Background())
	say("worker B: acquired %q, fence %d (larger than A's %d); computing", name, b.Fence(), a.Fence())
	totalB := compute(ctx, "B", say)
	if err := st.commit(ctx, "B", b, totalB); err != nil {
		return fmt.Errorf("worker B's commit: %w", err)
	}
	say("worker B: committed total %d under fence %d", totalB, b.Fence())

	// Worker A wakes up believing in its lease and commits.
	say("worker A: wakes up, still believing it holds fence %d, and commits total %d", a.Fence(), totalA)
	err = st.commit(ctx, "A", believed, totalA)
	switch {
	case errors.Is(err, fencing.ErrStale) && errors.Is(err, lease.ErrLost):
		say("worker A: turned down by the database: %v", err)
		say("worker A: errors.Is(err, lease.ErrLost) = true: stopping without writing")
	case err == nil:
		return errors.New("worker A's stale commit went through: fencing failed")
	default:
		return fmt.Errorf("worker A's commit: %w", err)
	}

	// Once A's watchdog catches up, its lease says it ended: the guard then
	// refuses before the database.
	<-a.Done()
	err = st.commit(ctx, "A", a, totalA)
	say("worker A, a moment later: %v (errors.Is ErrEnded = %t)", err, errors.Is(err, fencing.ErrEnded))
	if err := st.writtenBy(ctx, "B", say); err != nil {
		return err
	}
	say("done: B's results are intact")
	return nil
}

// commit writes a worker's totals under the guard: the upsert of the fence
// first, then the totals, in one transaction.
func (st *setting) commit(ctx context.Context, who string, f fencing.Fenced, total int64) error {
	return pgxfence.Tx(ctx, st.guard, st.conn, f, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO fencedjob_totals (run, day, total, writer, fence) VALUES ($1, '2026-11-23', $2, $3, $4)
			ON CONFLICT (run, day) DO UPDATE SET total = EXCLUDED.total, writer = EXCLUDED.writer, fence = EXCLUDED.fence`,
			st.runID, total, who, f.Fence())
		return err
	})
}
