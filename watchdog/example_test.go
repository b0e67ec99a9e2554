package watchdog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-go/tenure/watchdog"
)

// sessions is an in-memory store of login sessions that expire unless they
// are renewed: something other than a Redis lease that a watchdog keeps
// alive.
type sessions struct {
	mu      sync.Mutex
	expires map[string]time.Time
}

func (s *sessions) open(id string, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expires[id] = time.Now().Add(ttl)
}

func (s *sessions) revoke(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expires, id)
}

// Renew implements watchdog.Renewer[string]. It takes the lock once per
// batch, as a remote store would make one round trip.
func (s *sessions) Renew(_ context.Context, batch []watchdog.Renewal[string], errs []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for i, r := range batch {
		exp, ok := s.expires[r.Item]
		if !ok || !now.Before(exp) {
			errs[i] = fmt.Errorf("session %s: %w", r.Item, watchdog.ErrNotHeld)
			continue
		}
		if until := now.Add(r.TTL); exp.Before(until) { // never shorten
			s.expires[r.Item] = until
		}
	}
}

func Example() {
	store := &sessions{expires: map[string]time.Time{}}
	w := watchdog.New[string](store, watchdog.Config{
		// How far this process's clock may run ahead of the store's.
		Drift: func(ttl time.Duration) time.Duration { return ttl / 100 },
	})

	const ttl = time.Minute
	lost := make(chan error, 2)
	for _, id := range []string{"alice", "bob"} {
		sent := time.Now() // before the session's TTL starts counting
		store.open(id, ttl)
		holder := watchdog.LostFunc(func(reason error) { lost <- fmt.Errorf("%s: %w", id, reason) })
		// Renewed far more often than a one-minute TTL needs, so that the
		// example finds the revocation quickly.
		if _, err := w.Add(id, ttl, sent, 10*time.Millisecond, true, holder); err != nil {
			panic(err)
		}
	}

	store.revoke("bob") // an administrator logs bob out
	err := <-lost       // noticed at bob's next renewal
	fmt.Println("lost:", err, errors.Is(err, watchdog.ErrTakenOver))
	fmt.Println("still held:", w.Close())
	// Output:
	// lost: bob: watchdog: a renewal found the lease gone or held by another token: session bob: watchdog: not held true
	// still held: [alice]
}
