// Package leasetest gives a program's unit tests lease managers without a
// Redis server: their leases live in memory, with the lease contract of
// package lease (tokens, fences, renewal by the watchdog, a context
// cancelled on loss, Release, hooks), and a test can make a lease be lost,
// taken over or expire on demand, to test its own loss handling.
//
//	srv := leasetest.NewServer()
//	m, err := srv.NewManager(lease.WithTTL(time.Second))
//	...
//	l, _ := m.Acquire(ctx, "job")
//	srv.Delete("job") // the next renewal finds the lease gone
//	<-l.Done()        // context.Cause(l.Context()) is lease.ErrLost
//
// Loss is found the way it is on Redis: at the lease's next renewal, or at
// its local deadline when the server does not answer (SetUnreachable).
//
// Its managers log nowhere unless given lease.WithLogger, so that the
// losses a test causes on purpose print no warnings.
//
// An unreachable server answers nothing, yet no request waits on it for
// ever: it fails once the manager's op timeout (lease.WithOpTimeout, 5s by
// default) has passed, unless its context ended first, as a Redis client's
// read timeout ends a command nobody answers. So a deferred
// Release(context.Background()), as the README writes it, returns after
// the op timeout, with lease.ErrLost when the lease was lost meanwhile.
//
// # Under testing/synctest
//
// Run the test inside testing/synctest's bubble and the watchdog's timers,
// the op timeouts of an unreachable server and the in-memory TTLs (which
// follow time.Now) all run on the bubble's fake clock, so such a test
// takes no real time and always sees the same order of events:
//
//	synctest.Test(t, func(t *testing.T) {
//		srv := leasetest.NewServer()
//		m, _ := srv.NewManager()
//		defer m.Close()
//		l, _ := m.Acquire(ctx, "job")
//		defer l.Release(context.Background()) // gives up at the op timeout
//		srv.SetUnreachable(true)
//		<-l.Done() // by the local deadline: under 30s of fake time
//		// context.Cause(l.Context()) is lease.ErrLost
//	})
//
// Create the managers inside the bubble and close them there: a manager's
// goroutines live in the bubble, and synctest.Test fails with "deadlock:
// main bubble goroutine has exited but blocked goroutines remain" when the
// test returns with one still open.
//
// The in-memory server answers as tenure's Redis backend does, its Lua
// scripts' rules written in Go; the same contract tests run against both
// (internal/backend/contract_test.go and contract_permit_test.go). So
// every kind of hold works here: leases (lease.WithFair too), reentrant
// locks (package reentrant), semaphores (package semaphore: n, k at once,
// WithResize, Available) and read-write locks (package rwlock: writers
// first, Downgrade). Delete and TakeOver act on a semaphore's name as on
// any: every permit of it is lost. One difference: the server publishes
// no release messages, so a waiter learns that a name was freed at its
// next attempt, bounded by the holder's TTL and the backoff step
// (lease.WithBackOff), rather than at once; under testing/synctest that
// costs no real time. Nothing here talks to a network; miniredis, which
// tenure does not support, is not needed.
package leasetest

import (
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/bridge"
	"github.com/tenure-go/tenure/lease"
)

// A Server holds leases in memory for any number of managers, as one Redis
// does. It is safe for concurrent use.
type Server struct {
	fake *backend.Fake
}

// NewServer returns an empty Server.
func NewServer() *Server { return &Server{fake: backend.NewFake()} }

// NewManager returns a manager whose leases live in s, configured by opts
// as lease.New configures one (options about the Redis connection, such as
// lease.WithReplicaAcks, have nothing to act on). Its op timeout (WithOpTimeout)
// also plays the Redis client's read timeout: see SetUnreachable. Close it
// as any manager.
//
// It logs nowhere unless opts has lease.WithLogger: a test that loses
// leases on purpose would otherwise print "tenure: lease lost" warnings
// through slog.Default (lease.New's default), which is noise in a test's
// output. Pass lease.WithLogger to see them.
func (s *Server) NewManager(opts ...lease.Option) (*lease.Manager, error) {
	// First, so that a WithLogger of the caller's, applied later, wins.
	args := make([]any, 0, len(opts)+1)
	args = append(args, lease.WithLogger(slog.New(slog.DiscardHandler)))
	for _, o := range opts {
		args = append(args, o)
	}
	return bridge.Get[*lease.Manager, *lease.Lease, lease.AcquireOption]().OnBackend(s.fake, args)
}

// Delete removes name's lease, as an operator's forced release or an
// eviction would: its holder finds it gone at its next renewal, and its
// context ends with cause lease.ErrLost (EndInfo.Loss lease.LossDeleted).
func (s *Server) Delete(name string) { s.fake.Delete(name) }

// TakeOver gives name to another holder for ttl (0: no expiry), as when
// the lease expired unnoticed and someone else acquired it: its holder
// finds it at its next renewal, and its context ends with cause
// lease.ErrLost (EndInfo.Loss lease.LossTakenOver). Acquirers see the name
// held until ttl runs out or Delete.
func (s *Server) TakeOver(name string, ttl time.Duration) {
	s.fake.Set(name, "leasetest-other-holder", ttl)
}

// SetUnreachable makes every request go unanswered, as a paused server or
// a network partition does: it hangs until its context ends or its
// manager's op timeout (lease.WithOpTimeout) has passed, whichever comes
// first, and then fails, its outcome unknown: with the context's error, or
// with an error wrapping os.ErrDeadlineExceeded, as a Redis client's read
// timeout does. A lease then expires: no renewal is confirmed, and its
// context ends by its local deadline with cause lease.ErrLost
// (EndInfo.Loss lease.LossExpired), before the server's TTL could run out.
// Release and Close return after at most the op timeout. false makes the
// server answer again, from the next request on: those already sent stay
// unanswered, as lost packets do.
func (s *Server) SetUnreachable(on bool) { s.fake.SetHang(on) }

// Fail injects errors: every request calls fail with its kind, op
// ("acquire", "renew", "release", "abandon", "leave", "reenter",
// "available" or "downgrade"), and
// when fail returns an error the request fails with it, unapplied, as a
// command the server refused does. A nil fail clears it.
func (s *Server) Fail(fail func(op string) error) { s.fake.SetFault(fail) }

// Holder reports whether name is held, and for how much longer (0 when
// without expiry): what a test checks after Release or Close.
func (s *Server) Holder(name string) (held bool, ttl time.Duration) {
	_, ttl, held = s.fake.Holder(name)
	return held, ttl
}

// Flush forgets every lease and fence, as a restart of a Redis without
// persistence does: fences still grow (they are seeded from the clock).
func (s *Server) Flush() { s.fake.Flush() }
