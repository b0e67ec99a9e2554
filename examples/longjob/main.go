// Command longjob is tenure's main demo: a long-running job that holds a
// lease while the watchdog keeps it alive, and that stops cleanly when the
// lease is lost.
//
// It acquires "nightly-report" with a 2s TTL, so the watchdog renews it every
// 667ms and the lease's local deadline visibly keeps moving forward while the
// job works through its steps. After a few seconds it plays an operator who
// force-releases the name and another worker who takes it over. The watchdog
// notices at its next renewal, the lease's context is cancelled with cause
// lease.ErrLost, and the job stops without writing partial results. Then it
// shows the normal path: Manager.Do runs a task under a lease on another name
// and releases it, and Manager.Close leaves nothing held.
//
// Run it from the repository root with
//
//	go run ./examples/longjob
//
// With no REDIS_URL set it starts an embedded in-process Redis (miniredis),
// so it needs nothing installed. To use a real server instead:
//
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/longjob
//
// (names then get a random suffix, so runs do not collide). It finishes by
// itself in about 7 seconds. The narrative goes to stdout; the library's own
// log, where the lease-lost warning appears, goes to stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"
	"github.com/tenure-go/tenure/examples/internal/exampleredis"
	"github.com/tenure-go/tenure/lease"
)

const (
	ttl        = 2 * time.Second         // short, so that renewals (every ttl/3) are visible
	steps      = 20                      // the job's length: 20 steps ...
	stepTime   = 500 * time.Millisecond  // ... of 500ms each, far more than it gets to do
	takeOverAt = 4750 * time.Millisecond // when someone else takes the name: mid-step
)

func main() { examplecmd.Main("longjob", run) }

// run is the whole demo: the narrative goes to out, the library's log to logOut.
func run(ctx context.Context, out, logOut io.Writer) error {
	start := time.Now()
	say := examplecmd.Narrator(out, start, 10*time.Millisecond)
	r, err := exampleredis.Connect(ctx, say)
	if err != nil {
		return err
	}
	defer r.Close()
	client := r.NewClient()
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := lease.New(client, lease.WithTTL(ttl), lease.WithLogger(logger))
	if err != nil {
		return err
	}
	defer m.Close() // a second Close is a no-op: this one is for early returns

	// Part 1: a long job under a lease that is lost half-way.
	name := "nightly-report" + r.Suffix
	key := exampleredis.Keys.Lease(name) // the name's key in Redis (docs/design.md section 3)
	l, err := m.Acquire(ctx, name)
	if err != nil {
		return err
	}
	say("acquired %q: fence %d, local deadline in %v (TTL %v, renewed every %v)",
		name, l.Fence(), time.Until(l.Deadline()).Round(time.Millisecond), ttl, (ttl / 3).Round(time.Millisecond))
	stopTakeOver := after(takeOverAt, func() { takeOver(ctx, client, key, say) })
	defer stopTakeOver()
	if err := runJob(ctx, l, say); err != nil {
		return err // interrupted
	}
	stopTakeOver()

	// Releasing a lost lease is harmless: compare-and-delete leaves the new holder alone.
	err = l.Release(ctx)
	holder, _ := client.Get(ctx, key).Result()
	say("release after the loss: %v (errors.Is ErrNotHeld = %t); %s still holds %q",
		err, errors.Is(err, lease.ErrNotHeld), key, holder)

	// Part 2: the normal path. Do acquires, runs the task under the lease and releases.
	name2 := "weekly-cleanup" + r.Suffix
	key2 := exampleredis.Keys.Lease(name2)
	say("Do: running a short task under a lease on %q", name2)
	if err := m.Do(ctx, name2, func(ctx context.Context) error { return shortTask(ctx, say) }); err != nil {
		return fmt.Errorf("do: %w", err)
	}
	say("Do returned nil: the task is done and the lease on %q released", name2)

	// Part 3: Close releases whatever is still held and stops the watchdog.
	if err := m.Close(); err != nil {
		return err
	}
	if err := nothingHeld(ctx, client, l.Token(), key, key2); err != nil {
		return err
	}
	say("manager closed: %s is free and %s holds the other worker's token: nothing of ours is left held", key2, key)
	r.Cleanup(ctx, key, exampleredis.Keys.Fence(name), exampleredis.Keys.Fence(name2)) // fencing counters too
	say("clean finish in %v", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// runJob runs the long job under the lease's context, which the watchdog
// cancels with cause lease.ErrLost when the lease is lost, and stops it on
// Ctrl-C (ctx) too. (Manager.Do does this for you: see part 2.) Losing the
// lease is no error for the demo: the job stops without writing partial
// results.
func runJob(ctx context.Context, l *lease.Lease, say examplecmd.Say) error {
	jobCtx, stop := cancelledBy(l.Context(), ctx)
	err := longJob(jobCtx, l, say)
	stop()
	switch cause := context.Cause(l.Context()); {
	case errors.Is(err, lease.ErrLost):
		say("job: the lease's context is done; context.Cause: %q (errors.Is(cause, lease.ErrLost) = %t)",
			cause, errors.Is(cause, lease.ErrLost))
		say("stopping: lease lost, not writing partial results")
		return nil
	case err != nil:
		return err
	}
	say("job: all %d steps done, writing the report", steps)
	return nil
}
