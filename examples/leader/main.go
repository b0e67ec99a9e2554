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
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"
	"github.com/tenure-go/tenure/examples/internal/exampleredis"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

const (
	ttl     = time.Second // how long a dead leader blocks the name
	workers = 3
	tenure  = 1200 * time.Millisecond // how long each leader leads before the next event
)

func main() { examplecmd.Main("leader", run) }

// run is the whole demo: the narrative goes to out, the library's log to logOut.
func run(ctx context.Context, out, logOut io.Writer) error {
	start := time.Now()
	say := examplecmd.Narrator(out, start, 10*time.Millisecond)
	r, err := exampleredis.Connect(ctx, say)
	if err != nil {
		return err
	}
	defer r.Close()
	name := "scheduler" + r.Suffix
	s := newStage(ctx, say)
	defer s.stop() // every campaign and the observer, then their managers
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelError}))
	for i := 1; i <= workers; i++ {
		if err := s.campaign(r.NewClient(), name, fmt.Sprintf("worker-%d", i), logger); err != nil {
			return err
		}
	}
	watcher, err := s.observe(r.NewClient(), name)
	if err != nil {
		return err
	}

	// The three ways a leader goes away, one after the other (scenes.go).
	first, err := s.next()
	if err != nil {
		return err
	}
	second, err := processEnds(s, first)
	if err != nil {
		return err
	}
	third, err := cutOff(s, second)
	if err != nil {
		return err
	}
	if err := resigns(ctx, s, third, watcher); err != nil {
		return err
	}
	r.Cleanup(ctx, exampleredis.Keys.Lease(name), exampleredis.Keys.Fence(name), exampleredis.Keys.Leader(name))
	say("clean finish in %v", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// campaign starts a worker: its own manager and election on client, as if
// it were a process of its own, campaigning for name until the stage stops.
func (s *stage) campaign(client *redis.Client, name, id string, logger *slog.Logger) error {
	m, err := lease.New(client, lease.WithLogger(logger), lease.WithOpTimeout(time.Second))
	if err != nil {
		return err
	}
	s.closers = append([]func() error{m.Close}, s.closers...) // the latest first
	e, err := election.New(election.Config{Manager: m, Client: client, Name: name, Identity: id, TTL: ttl,
		RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	w := &worker{id: id, client: client, m: m, e: e, done: make(chan error, 1)}
	s.wg.Go(func() { w.done <- e.Run(s.ctx, w.callbacks(s.say, s.started)) })
	return nil
}

// callbacks are a worker's election callbacks: it "works" while it leads,
// and reports its terms.
func (w *worker) callbacks(say examplecmd.Say, started chan<- term) election.Callbacks {
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
					w.stopped(time.Now())
					say("%s stops leading term %d: %v", w.id, rec.Fence, context.Cause(ctx))
					return
				}
			}
		},
	}
}
