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
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/examples/internal/exampleredis"
	"github.com/tenure-go/tenure/internal/keys"

	"github.com/tenure-go/tenure/lease"
)

const (
	ttl        = 2 * time.Second         // short, so that renewals (every ttl/3) are visible
	steps      = 20                      // the job's length: 20 steps ...
	stepTime   = 500 * time.Millisecond  // ... of 500ms each, far more than it gets to do
	takeOverAt = 4750 * time.Millisecond // when someone else takes the name: mid-step
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "longjob:", err)
		os.Exit(1)
	}
}

// run is the whole demo: the narrative goes to out, the library's log to logOut.
func run(ctx context.Context, out, logOut io.Writer) error {
	start := time.Now()
	say := newNarrator(out, start)
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
	defer m.Close() // a second Close is a no-op: this one is for early returns

	// Part 1: a long job under a lease that is lost half-way.
	name := "nightly-report" + suffix
	layout := keys.Layout{Prefix: lease.DefaultKeyPrefix} // the keys of a name (docs/design.md section 3)
	key := layout.Lease(name)
	l, err := m.Acquire(ctx, name)
	if err != nil {
		return err
	}
	say("acquired %q: fence %d, local deadline in %v (TTL %v, renewed every %v)",
		name, l.Fence(), time.Until(l.Deadline()).Round(time.Millisecond), ttl, (ttl / 3).Round(time.Millisecond))

	stopTakeOver := after(takeOverAt, func() {
		// An operator's force-release, then another worker's acquisition.
		_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			p.Set(ctx, key, "another-worker", 10*time.Second)
			return nil
		})
		if err != nil {
			say("meanwhile: the take-over failed: %v", err)
			return
		}
		say("meanwhile: an operator deleted %s and another worker SET it to its own token", key)
	})
	defer stopTakeOver()

	// The job works under the lease's context, and stops early on Ctrl-C too.
	// (Manager.Do does this for you: see part 2.)
	jobCtx, cancel := context.WithCancelCause(l.Context())
	stopAfter := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	err = longJob(jobCtx, l, say)
	stopAfter()
	cancel(nil)
	switch cause := context.Cause(l.Context()); {
	case errors.Is(err, lease.ErrLost):
		say("job: the lease's context is done; context.Cause: %q (errors.Is(cause, lease.ErrLost) = %t)",
			cause, errors.Is(cause, lease.ErrLost))
		say("stopping: lease lost, not writing partial results")
	case err != nil:
		return err // interrupted
	default:
		say("job: all %d steps done, writing the report", steps)
	}
	stopTakeOver()

	// Releasing a lost lease is harmless: compare-and-delete leaves the new holder alone.
	err = l.Release(ctx)
	holder, _ := client.Get(ctx, key).Result()
	say("release after the loss: %v (errors.Is ErrNotHeld = %t); %s still holds %q",
		err, errors.Is(err, lease.ErrNotHeld), key, holder)

	// Part 2: the normal path. Do acquires, runs the task under the lease and releases.
	name2 := "weekly-cleanup" + suffix
	key2 := layout.Lease(name2)
	say("Do: running a short task under a lease on %q", name2)
	err = m.Do(ctx, name2, func(ctx context.Context) error {
		for i := 1; i <= 3; i++ {
			if err := work(ctx, stepTime); err != nil {
				return err
			}
			say("Do: task step %d/3 done", i)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("do: %w", err)
	}
	say("Do returned nil: the task is done and the lease on %q released", name2)

	// Part 3: Close releases whatever is still held and stops the watchdog.
	if err := m.Close(); err != nil {
		return err
	}
	n, err := client.Exists(ctx, key2).Result()
	if err != nil {
		return err
	}
	holder, _ = client.Get(ctx, key).Result()
	if n != 0 || holder == l.Token() {
		return errors.New("a lease is still held after Close")
	}
	say("manager closed: %s is free and %s holds the other worker's token: nothing of ours is left held", key2, key)

	if suffix != "" { // a shared server: remove this run's keys, fencing counters included
		client.Del(ctx, key, layout.Fence(name), layout.Fence(name2))
	}
	say("clean finish in %v", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// longJob works through its steps under ctx, looking at the lease's local
// deadline about once a second. It returns why it stopped early, if it did.
func longJob(ctx context.Context, l *lease.Lease, say func(string, ...any)) error {
	say("job: starting %d steps of %v", steps, stepTime)
	lastDeadline, lastLook := l.Deadline(), time.Now()
	for i := 1; i <= steps; i++ {
		if err := work(ctx, stepTime); err != nil {
			say("job: step %d/%d interrupted", i, steps)
			return err
		}
		say("job: step %d/%d done", i, steps)
		if now := time.Now(); now.Sub(lastLook) >= time.Second {
			d := l.Deadline()
			note := "no renewal since the last look"
			if d.After(lastDeadline) {
				note = fmt.Sprintf("renewed: it moved %v forward since the last look", d.Sub(lastDeadline).Round(time.Millisecond))
			}
			say("lease: %v left to the local deadline (%s)", time.Until(d).Round(time.Millisecond), note)
			lastDeadline, lastLook = d, now
		}
	}
	return nil
}

// work stands for one step of real work taking d. It stops as soon as ctx
// is done and returns the cause.
func work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// after runs fn in a goroutine once d has passed, unless stopped first.
// stop may be called more than once; it returns when the goroutine has ended.
func after(d time.Duration, fn func()) (stop func()) {
	cancel, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			fn()
		case <-cancel:
		}
	}()
	return sync.OnceFunc(func() { close(cancel); <-done })
}

// newNarrator returns a printf for the narrative, safe for concurrent use,
// each line stamped with the time since start.
func newNarrator(w io.Writer, start time.Time) func(format string, args ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%5.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
}
