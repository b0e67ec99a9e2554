package watchdog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure/watchdog"
)

// link is a Renewer that models a Redis client on a slow link as go-redis
// behaves: a pool of connections, each call taking one (or dialing a new
// one, which costs a round trip for HELLO before the command), a server
// whose script cache may be cold (EVALSHA answered NOSCRIPT, then EVAL: a
// second round trip), and a call given up by its context dropping its
// connection, so that the next call dials again. A connection may also die
// silently (dead): whatever is sent on it is never answered.
type link struct {
	rtt time.Duration
	// dialTrips is how many round trips a new connection costs before
	// its first command (1 when 0: HELLO; 2 with CLIENT SETINFO).
	dialTrips int
	// readTimeout, when set, is go-redis without ContextTimeoutEnabled: a
	// call does not end with its context, and one on a dead connection
	// fails after readTimeout.
	readTimeout time.Duration

	mu    sync.Mutex
	idle  []*conn // connections in the pool
	cold  bool    // the server's script cache is empty
	dials int
	drops int
	calls int
	out   int // calls in flight
	// hung is when each call that found its connection dead began.
	hung []time.Time
}

type conn struct{ dead bool }

func (l *link) get() (c *conn, dialed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.out++
	if n := len(l.idle); n > 0 {
		c = l.idle[n-1]
		l.idle = l.idle[:n-1]
		return c, false
	}
	l.dials++
	return &conn{}, true
}

func (l *link) put(c *conn, dropped bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out--
	if dropped {
		l.drops++
		return
	}
	l.idle = append(l.idle, c)
}

// roundTrip waits one round trip on c, or until ctx ends.
func (l *link) roundTrip(ctx context.Context, c *conn) error {
	if c.dead {
		l.mu.Lock()
		l.hung = append(l.hung, time.Now())
		l.mu.Unlock()
	}
	if l.readTimeout > 0 {
		if c.dead {
			time.Sleep(l.readTimeout)
			return errReadTimeout
		}
		time.Sleep(l.rtt)
		return nil
	}
	if c.dead {
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case <-time.After(l.rtt):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *link) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	c, dialed := l.get()
	err := l.exchange(ctx, c, dialed)
	l.put(c, err != nil)
	for i := range errs {
		errs[i] = err
	}
}

// exchange is one call's round trips: HELLO on a new connection, EVALSHA,
// and EVAL after a NOSCRIPT, which also loads the script.
func (l *link) exchange(ctx context.Context, c *conn, dialed bool) error {
	for range max(l.dialTrips, 1) * btoi(dialed) {
		if err := l.roundTrip(ctx, c); err != nil {
			return err
		}
	}
	if err := l.roundTrip(ctx, c); err != nil {
		return err
	}
	l.mu.Lock()
	cold := l.cold
	l.cold = false // the EVAL below loads it
	l.mu.Unlock()
	if cold {
		return l.roundTrip(ctx, c)
	}
	return nil
}

func (l *link) flush(dead bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cold = true
	for _, c := range l.idle {
		c.dead = dead
	}
	if !dead {
		l.drops += len(l.idle)
		l.idle = nil // a restart closes every connection
	}
}

var errReadTimeout = errors.New("i/o timeout")

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// redial closes every pooled connection, the script cache kept: the next
// calls dial again.
func (l *link) redial() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drops += len(l.idle)
	l.idle = nil
}

func (l *link) stats() (dials, drops, calls int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dials, l.drops, l.calls
}

// holdOn keeps n leases of ttl on w and returns a channel of their losses.
func holdOn(t *testing.T, w *watchdog.Watchdog[string], n int, ttl time.Duration) <-chan error {
	lost := make(chan error, n)
	for i := range n {
		name := string(rune('a' + i))
		if _, err := w.Add(name, ttl, time.Now(), ttl/3, true, watchdog.LostFunc(func(err error) { lost <- err })); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 3 / time.Duration(n)) // spread: each its own batch
	}
	return lost
}

func noLoss(t *testing.T, lost <-chan error, what string) {
	t.Helper()
	select {
	case err := <-lost:
		t.Fatalf("%s: a lease was lost: %v", what, err)
	default:
	}
}

// L1 (docs/design.md, "Under stress"): a link whose round trip jumps to
// 600ms, below the 1s renewal interval of a 3s TTL, keeps every lease, and
// does so when every connection must be dialed again and the script cache
// is cold (a server restart): HELLO, EVALSHA, NOSCRIPT, EVAL is three
// round trips, 1.8s, within the 1.92s a renewal sent at the interval has
// before the lease's loss. A renewal given up at half the interval, as
// before, dropped its connection and paid a dial again each time, and
// lost all of them within seconds.
func TestSlowLinkKeepsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &link{rtt: time.Millisecond}
		w := watchdog.New[string](l, watchdog.Config{Drift: drift})
		defer w.Close()
		lost := holdOn(t, w, 10, 3*time.Second)
		time.Sleep(5 * time.Second)
		l.mu.Lock()
		l.rtt = 600 * time.Millisecond
		l.mu.Unlock()
		time.Sleep(20 * time.Second)
		noLoss(t, lost, "600ms round trips, warm")
		l.flush(false) // a restart: every connection closed, the cache empty
		time.Sleep(20 * time.Second)
		noLoss(t, lost, "600ms round trips after a restart")
		if dials, drops, _ := l.stats(); drops > 10+len("abcdefghij") {
			t.Errorf("%d connections dropped (%d dialed): renewals were given up on a slow link", drops, dials)
		}
	})
}

// The cold-cache case at a short TTL: 600ms (interval 200ms) at an 80ms
// round trip, the script cache flushed every few seconds.
func TestColdScriptCacheKeepsShortLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &link{rtt: 80 * time.Millisecond}
		w := watchdog.New[string](l, watchdog.Config{Drift: drift})
		defer w.Close()
		lost := holdOn(t, w, 5, 600*time.Millisecond)
		for range 10 {
			time.Sleep(2 * time.Second)
			l.flush(false)
		}
		noLoss(t, lost, "80ms round trips with a cold script cache")
	})
}

// A connection that dies silently (no reset, no answer) is what giving a
// renewal up early was for: a second attempt, on another connection, goes
// out beside the first once that has waited long enough, and keeps the
// lease.
func TestDeadConnectionIsHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &link{rtt: 5 * time.Millisecond}
		w := watchdog.New[string](l, watchdog.Config{Drift: drift})
		defer w.Close()
		lost := holdOn(t, w, 1, 3*time.Second)
		time.Sleep(2500 * time.Millisecond) // between renewals: the connection is idle
		l.flush(true)                       // the pooled connection now swallows everything
		time.Sleep(10 * time.Second)
		noLoss(t, lost, "one connection died silently")
		if _, drops, _ := l.stats(); drops == 0 {
			t.Error("the dead connection was never given up")
		}
	})
}

// A second attempt that finds the lease gone loses it, even while the
// first is still unanswered.
func TestHedgeReportsTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &takeover{}
		w := watchdog.New[string](r, watchdog.Config{Drift: drift})
		defer w.Close()
		lost := make(chan error, 1)
		start := time.Now()
		if _, err := w.Add("x", 3*time.Second, start, time.Second, true, watchdog.LostFunc(func(err error) { lost <- err })); err != nil {
			t.Fatal(err)
		}
		err := <-lost
		if !errors.Is(err, watchdog.ErrTakenOver) {
			t.Fatalf("lost with %v, want ErrTakenOver from the second attempt", err)
		}
		if took := time.Since(start); took >= 2*time.Second {
			t.Fatalf("lost after %v: the second attempt's answer was not used", took)
		}
	})
}

// takeover never answers its first call; every later one finds the item
// taken.
type takeover struct {
	mu    sync.Mutex
	calls int
}

func (r *takeover) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	r.mu.Lock()
	r.calls++
	first := r.calls == 1
	r.mu.Unlock()
	if first {
		<-ctx.Done()
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return
	}
	for i := range errs {
		errs[i] = watchdog.ErrNotHeld
	}
}

// deadThenPromoted is a Cluster of two nodes whose first, holding the
// items named "dead...", is killed until up: every call sent before then
// takes 3s (go-redis dialing the dead node again and again) and fails the
// dead node's items, while the live node's are renewed. Calls sent from up
// on are answered at once (the dead node's replica promoted).
type deadThenPromoted struct{ up time.Time }

func (d deadThenPromoted) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	if !time.Now().Before(d.up) {
		return
	}
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
	}
	for i, r := range batch {
		if strings.HasPrefix(r.Item, "dead") {
			errs[i] = errors.New("dial tcp: connect: connection refused")
		}
	}
}

// Attempts that failed without an answer for every renewal do not raise
// the round-trip estimate: leases whose node is back 3.9s before their loss
// are renewed, not given up as hopeless for the 3s their failures took
// while the live node answered.
func TestFailuresAreNoRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		w := watchdog.New[string](deadThenPromoted{up: start.Add(8 * time.Second)}, watchdog.Config{Drift: drift})
		defer w.Close()
		lost := make(chan string, 20)
		for i := range 20 {
			name := fmt.Sprint("dead", i)
			if i%2 == 1 {
				name = fmt.Sprint("live", i)
			}
			if _, err := w.Add(name, 12*time.Second, start, 4*time.Second, true, watchdog.LostFunc(func(err error) { lost <- name + ": " + err.Error() })); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(30 * time.Second)
		select {
		case l := <-lost:
			t.Fatalf("lost although renewals were answered from 8s, 3.9s before the loss: %s", l)
		default:
		}
	})
}
