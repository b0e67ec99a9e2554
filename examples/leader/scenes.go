package main

// The demo's stage: the three scenes run calls, each a way a leader goes
// away; the observer; and what hands run each term as it starts and stops
// it all at the end. main.go is the election itself.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// processEnds: the leader's process ends cleanly. Its manager is closed,
// without resigning, which releases the lease: the release message wakes
// the waiting workers and one of them leads a few round trips later.
func processEnds(s *stage, first term) (term, error) {
	if err := s.pause(tenure); err != nil {
		return term{}, err
	}
	s.say("%s's process ends: its manager is closed, without resigning", first.w.id)
	at := time.Now()
	_ = first.w.m.Close()
	second, err := s.next()
	if err != nil {
		return term{}, err
	}
	s.say("%s took over from %s %v after the close (a release message woke it), term %d > %d",
		second.w.id, first.w.id, time.Since(at).Round(100*time.Microsecond), second.rec.Fence, first.rec.Fence)
	return second, nil
}

// cutOff: the leader is cut off from Redis. Its connection is closed, so
// none of its renewals gets through. Its leading context is cancelled at
// its lease's local deadline, before Redis lets the lease expire, so it has
// stopped leading before the next worker starts: the output shows both
// instants.
func cutOff(s *stage, second term) (term, error) {
	if err := s.pause(tenure); err != nil {
		return term{}, err
	}
	s.say("%s is cut off from Redis: its connection is closed, its renewals fail", second.w.id)
	at := time.Now()
	_ = second.w.client.Close()
	third, err := s.next()
	if err != nil {
		return term{}, err
	}
	stopped := second.w.stoppedAt()
	if stopped.IsZero() || !stopped.Before(third.start) {
		return term{}, fmt.Errorf("%s still led when %s started", second.w.id, third.w.id)
	}
	s.say("%s stopped leading %v after it was cut off; %s started %v after, %v later: never two leaders",
		second.w.id, stopped.Sub(at).Round(time.Millisecond), third.w.id, third.start.Sub(at).Round(time.Millisecond),
		third.start.Sub(stopped).Round(100*time.Microsecond))
	return third, nil
}

// resigns: the leader resigns. The others are gone, so nobody is left to
// lead, and the observer (watcher) says so.
func resigns(ctx context.Context, s *stage, third term, watcher *election.Election) error {
	if err := s.pause(tenure); err != nil {
		return err
	}
	s.say("%s resigns", third.w.id)
	if err := third.w.e.Resign(ctx); err != nil {
		return err
	}
	if err := <-third.w.done; err != nil {
		return fmt.Errorf("%s: Run after Resign: %w", third.w.id, err)
	}
	s.say("%s's Run returned nil after Resign", third.w.id)
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	defer rcancel()
	if _, err := watcher.Leader(rctx); !errors.Is(err, election.ErrNoLeader) {
		return fmt.Errorf("after the last resignation: Leader = %v", err)
	}
	_ = s.pause(50 * time.Millisecond) // let the observer report it
	return nil
}

// observe starts an observer that takes no part, showing what a dashboard
// would, and returns its election, which can say who leads.
func (s *stage) observe(client *redis.Client, name string) (*election.Election, error) {
	watcher, err := election.New(election.Config{Client: client, Name: name})
	if err != nil {
		return nil, err
	}
	observed := watcher.Observe(s.ctx)
	s.wg.Go(func() {
		for rec := range observed {
			if rec.Fence == 0 {
				s.say("observer: %q has no leader", name)
			} else {
				s.say("observer: %q is led by %s, term %d", name, rec.Identity, rec.Fence)
			}
		}
	})
	return watcher, nil
}

// worker is one candidate: its own Redis client, manager and election, as
// if it were a process of its own.
type worker struct {
	id     string
	client *redis.Client
	m      *lease.Manager
	e      *election.Election
	done   chan error // Run's result

	mu   sync.Mutex
	last time.Time // when its leading context was last cancelled
}

// stopped records when the worker's leading context was cancelled.
func (w *worker) stopped(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = at
}

// stoppedAt returns when the worker last stopped leading; zero if never.
func (w *worker) stoppedAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// term is a leadership that started.
type term struct {
	w     *worker
	rec   election.Record
	start time.Time
}

// stage runs the campaigns and the observer, hands run the terms as they
// start, and stops them all at the end.
type stage struct {
	ctx     context.Context // cancelled by stop
	cancel  context.CancelFunc
	say     examplecmd.Say
	started chan term
	wg      sync.WaitGroup
	closers []func() error // the workers' managers
}

// newStage returns a stage whose campaigns end when ctx does, or at stop.
func newStage(ctx context.Context, say examplecmd.Say) *stage {
	ctx, cancel := context.WithCancel(ctx)
	return &stage{ctx: ctx, cancel: cancel, say: say, started: make(chan term, 2*workers)}
}

// next waits for the next term to start.
func (s *stage) next() (term, error) {
	select {
	case t := <-s.started:
		return t, nil
	case <-time.After(5 * ttl):
		return term{}, errors.New("nobody took over")
	case <-s.ctx.Done():
		return term{}, context.Cause(s.ctx)
	}
}

// pause lets the demo's time pass, unless it is interrupted.
func (s *stage) pause(d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-s.ctx.Done():
		return context.Cause(s.ctx)
	}
}

// stop stops every campaign and the observer, then closes the managers.
func (s *stage) stop() {
	s.cancel()
	s.wg.Wait()
	for _, c := range s.closers {
		_ = c()
	}
}
