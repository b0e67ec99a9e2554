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
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-go/tenure/examples/internal/exampleredis"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Getenv("DATABASE_URL"), os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, errNoDatabase) {
		fmt.Fprintln(os.Stderr, "fencedjob:", err)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencedjob:", err)
		os.Exit(1)
	}
}

// run is the whole demo: the narrative goes to out, the library's log to logOut.
func run(ctx context.Context, dbURL string, out, logOut io.Writer) error {
	if dbURL == "" {
		return errNoDatabase
	}
	start := time.Now()
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%6.3fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	defer conn.Close(context.Background())
	say("postgres: connected to %s (server %s)", conn.Config().Host, conn.PgConn().ParameterStatus("server_version"))

	r, err := exampleredis.Connect(ctx, say)
	if err != nil {
		return err
	}
	defer r.Close()
	client, suffix := r.NewClient(), r.Suffix
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := lease.New(client, lease.WithTTL(ttl), lease.WithLogger(logger))
	if err != nil {
		return err
	}
	defer m.Close()

	guard, err := fencing.New() // PostgreSQL, table tenure_fences
	if err != nil {
		return err
	}
	if err := pgxfence.EnsureSchema(ctx, guard, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS fencedjob_totals (
		run text NOT NULL, day text NOT NULL, total bigint NOT NULL, writer text NOT NULL, fence bigint NOT NULL,
		PRIMARY KEY (run, day))`); err != nil {
		return err
	}
	runID := strings.ToLower(rand.Text()[:8])
	name := "nightly-totals" + suffix + "-" + runID // a resource of this run's own
	say("guard: fences recorded in tenure_fences; results go to fencedjob_totals (run %s)", runID)

	// commit writes a worker's totals under the guard: the upsert of the
	// fence first, then the totals, in one transaction.
	commit := func(who string, f fencing.Fenced, total int64) error {
		return pgxfence.Tx(ctx, guard, conn, f, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO fencedjob_totals (run, day, total, writer, fence) VALUES ($1, '2026-11-23', $2, $3, $4)
				ON CONFLICT (run, day) DO UPDATE SET total = EXCLUDED.total, writer = EXCLUDED.writer, fence = EXCLUDED.fence`,
				runID, total, who, f.Fence())
			return err
		})
	}

	// Worker A: takes the lease and starts. Its watchdog will not renew:
	// that is what a pause of its whole process does to it.
	a, err := m.Acquire(ctx, name, lease.WithAutoRenew(false))
	if err != nil {
		return err
	}
	say("worker A: acquired %q, fence %d; computing", name, a.Fence())
	believed := heldView{name: a.Name(), fence: a.Fence()} // what A believes, and will on waking
	totalA := compute(ctx, "A", say)
	say("worker A: paused (a long GC, a frozen VM) for longer than its %v lease...", ttl)

	// Worker B: waits for the name, which A's lease frees by running out.
	b, err := m.Acquire(ctx, name)
	if err != nil {
		return err
	}
	defer b.Release(context.Background())
	say("worker B: acquired %q, fence %d (larger than A's %d); computing", name, b.Fence(), a.Fence())
	totalB := compute(ctx, "B", say)
	if err := commit("B", b, totalB); err != nil {
		return fmt.Errorf("worker B's commit: %w", err)
	}
	say("worker B: committed total %d under fence %d", totalB, b.Fence())

	// Worker A wakes up believing in its lease and commits.
	say("worker A: wakes up, still believing it holds fence %d, and commits total %d", a.Fence(), totalA)
	err = commit("A", believed, totalA)
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
	err = commit("A", a, totalA)
	say("worker A, a moment later: %v (errors.Is ErrEnded = %t)", err, errors.Is(err, fencing.ErrEnded))

	var writer string
	var total, fence int64
	if err := conn.QueryRow(ctx, "SELECT writer, total, fence FROM fencedjob_totals WHERE run = $1", runID).Scan(&writer, &total, &fence); err != nil {
		return err
	}
	say("fencedjob_totals for run %s: total %d written by worker %s under fence %d", runID, total, writer, fence)
	if writer != "B" {
		return fmt.Errorf("the row was written by %s", writer)
	}
	say("done: B's results are intact")
	return nil
}

// compute is the long job: a few steps, with a result that depends on the
// worker so that an overwrite would show.
func compute(ctx context.Context, who string, say func(string, ...any)) int64 {
	var total int64
	for i := 1; i <= steps; i++ {
		select {
		case <-ctx.Done():
			return total
		case <-time.After(50 * time.Millisecond):
		}
		total += int64(i * 100)
	}
	if who == "A" {
		total++ // A read the day's data before B: its total differs
	}
	say("worker %s: computed total %d", who, total)
	return total
}

// heldView is a lease as its holder sees it right after a pause of its whole
// process, before its watchdog has run: the name and fence, still held.
type heldView struct {
	name  string
	fence int64
}

func (h heldView) Name() string             { return h.name }
func (h heldView) Fence() int64             { return h.fence }
func (h heldView) Err() error               { return nil }
func (h heldView) Context() context.Context { return context.Background() }
