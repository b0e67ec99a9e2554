// Command leader shows leader election with package election: three workers
// campaign for one name, one leads, and leadership moves when the leader
// goes away, in each of the ways a leader goes away.
//
//  1. The first leader's process ends cleanly: its lease.Manager is closed
//     (without resigning), which releases the lease; the release message
//     wakes the waiting workers and one of them leads a few round trips
//     later.
//  2. The second leader is cut off from Redis (its connection is closed, so
//     none of its renewals gets through). Its leading context is cancelled
//     at its lease's local deadline, before Redis lets the lease expire, so
//     it has stopped leading before the third worker starts: the output
//     shows both instants.
//  3. The third leader resigns; nobody is left to lead, and the observer
//     says so.
//
// Every line shows the leader's identity and its term (the lease's fencing
// token, which only grows). An observer (Election.Observe) reports each
// change as it happens.
//
// Run it from the repository root with
//
//	go run ./examples/leader
//
// With no REDIS_URL set it starts an embedded in-process Redis (miniredis).
// To use a real server instead (names then get a random suffix):
//
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/leader
//
// It finishes by itself in about 5 seconds.
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

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

const (
	ttl     = time.Second // how long a dead leader blocks the name
	workers = 3
	tenure  = 1200 * time.Millisecond // how long each leader leads before the next event
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "leader:", err)
		os.Exit(1)
	}
}

// worker is one candidate: its own Redis client, manager and election, as
// if it were a process of its own.
type worker struct {
	id     string
	client *redis.Client
	m      *lease.Manager
	e      *election.Election
	done   chan error // Run's result

	mu      sync.Mutex
	stopped time.Time // when its leading context was last cancelled
}

// term is a leadership that started.
type term struct {
	w     *worker
	rec   election.Record
	start time.Time
}

// run is the whole demo: the narrative goes to out, the library's log to logOut.
func run(ctx context.Context, out, logOut io.Writer) error {
	start := time.Now()
	say := newNarrator(out, start)
	opts, suffix, closeRedis, err := connect(ctx, say)
	if err != nil {
		return err
	}
	defer closeRedis()
	name := "scheduler" + suffix
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelError}))

	ctx, cancel := context.WithCancel(ctx)
	started := make(chan term, 2*workers)
	var (
		wg      sync.WaitGroup
		closers []func() error
	)
	defer func() {
		// Stop every campaign and the observer, then close what they used.
		cancel()
		wg.Wait()
		for _, c := range closers {
			_ = c()
		}
	}()
	for i := 1; i <= workers; i++ {
		w := &worker{id: fmt.Sprintf("worker-%d", i), client: redis.NewClient(opts), done: make(chan error, 1)}
		closers = append(closers, w.client.Close)
		w.m, err = lease.New(w.client, lease.WithLogger(logger), lease.WithOpTimeout(time.Second))
		if err != nil {
			return err
		}
		closers = append([]func() error{w.m.Close}, closers...) // managers first
		w.e, err = election.New(election.Config{Manager: w.m, Client: w.client, Name: name, Identity: w.id, TTL: ttl,
			RetryPeriod: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		wg.Go(func() { w.done <- w.e.Run(ctx, w.callbacks(say, started)) })
	}

	// An observer that takes no part: what a dashboard would show.
	watchClient := redis.NewClient(opts)
	closers = append(closers, watchClient.Close)
	watcher, err := election.New(election.Config{Client: watchClient, Name: name})
	if err != nil {
		return err
	}
	observed := watcher.Observe(ctx)
	wg.Go(func() {
		for rec := range observed {
			if rec.Fence == 0 {
				say("observer: %q has no leader", name)
			} else {
				say("observer: %q is led by %s, term %d", name, rec.Identity, rec.Fence)
			}
		}
	})

	next := func() (term, error) {
		select {
		case t := <-started:
			return t, nil
		case <-time.After(5 * ttl):
			return term{}, errors.New("nobody took over")
		case <-ctx.Done():
			return term{}, context.Cause(ctx)
		}
	}
	pause := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}

	first, err := next()
	if err != nil {
		return err
	}
	if err := pause(tenure); err != nil {
		return err
	}

	// 1. The leader's process ends cleanly: Close releases its lease.
	say("%s's process ends: its manager is closed, without resigning", first.w.id)
	at := time.Now()
	_ = first.w.m.Close()
	second, err := next()
	if err != nil {
		return err
	}
	say("%s took over from %s %v after the close (a release message woke it), term %d > %d",
		second.w.id, first.w.id, time.Since(at).Round(100*time.Microsecond), second.rec.Fence, first.rec.Fence)
	if err := pause(tenure); err != nil {
		return err
	}

	// 2. The leader is cut off from Redis: nothing it sends arrives.
	say("%s is cut off from Redis: its connection is closed, its renewals fail", second.w.id)
	at = time.Now()
	_ = second.w.client.Close()
	third, err := next()
	if err != nil {
		return err
	}
	second.w.mu.Lock()
	stopped := second.w.stopped
	second.w.mu.Unlock()
	if stopped.IsZero() || !stopped.Before(third.start) {
		return fmt.Errorf("%s still led when %s started", second.w.id, third.w.id)
	}
	say("%s stopped leading %v after it was cut off; %s started %v after, %v later: never two leaders",
		second.w.id, stopped.Sub(at).Round(time.Millisecond), third.w.id, third.start.Sub(at).Round(time.Millisecond),
		third.start.Sub(stopped).Round(100*time.Microsecond))
	if err := pause(tenure); err != nil {
		return err
	}

	// 3. The leader resigns; the others are gone, so nobody leads.
	say("%s resigns", third.w.id)
	if err := third.w.e.Resign(ctx); err != nil {
		return err
	}
	if err := <-third.w.done; err != nil {
		return fmt.Errorf("%s: Run after Resign: %w", third.w.id, err)
	}
	say("%s's Run returned nil after Resign", third.w.id)
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	defer rcancel()
	if _, err := watcher.Leader(rctx); !errors.Is(err, election.ErrNoLeader) {
		return fmt.Errorf("after the last resignation: Leader = %v", err)
	}
	_ = pause(50 * time.Millisecond) // let the observer report it
	if suffix != "" {                // a shared server: remove this run's keys
		layout := keys.Layout{Prefix: lease.DefaultKeyPrefix}
		opts := *opts
		c := redis.NewClient(&opts)
		c.Del(context.Background(), layout.Lease(name), layout.Fence(name), layout.Leader(name))
		c.Close()
	}
	say("clean finish in %v", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// callbacks are a worker's election callbacks: it "works" while it leads,
// and reports its terms.
func (w *worker) callbacks(say func(string, ...any), started chan<- term) election.Callbacks {
	return election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			rec, _ := election.Leading(ctx)
			say("%s leads: term %d", w.id, rec.Fence)
			select {
			case started <- term{w: w, rec: rec, start: time.Now()}:
			case <-ctx.Done():
			}
			tick := time.NewTicker(400 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					say("%s: scheduling under term %d", w.id, rec.Fence)
				case <-ctx.Done():
					at := time.Now()
					w.mu.Lock()
					w.stopped = at
					w.mu.Unlock()
					say("%s stops leading term %d: %v", w.id, rec.Fence, context.Cause(ctx))
					return
				}
			}
		},
	}
}

// connect returns client options for REDIS_URL or an embedded Redis;
// closeRedis stops whatever it started, and suffix makes names unique on a
// shared server.
func connect(ctx context.Context, say func(string, ...any)) (opts *redis.Options, suffix string, closeRedis func(), err error) {
	r, err := exampleredis.Start(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	say("redis: %s", r.About)
	return r.Options, r.Suffix, r.Close, nil
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
