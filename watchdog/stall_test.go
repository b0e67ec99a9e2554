package watchdog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure/watchdog"
)

// stalled is a server that stops answering from from to to (SIGSTOP):
// whatever reaches it meanwhile is answered at to, and what is sent after
// to is answered at once. A request whose context ends first is unknown.
type stalled struct{ from, to time.Time }

func (s stalled) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	now := time.Now()
	if now.Before(s.from) || !now.Before(s.to) {
		return
	}
	select {
	case <-time.After(s.to.Sub(now)):
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
}

// L1 (docs/design.md, "Under stress"): a renewal answered before its
// lease's loss time keeps the lease, however long the stall that delayed
// it. A 3s lease renewed every second falls due at 1s; the server stops
// at 0.9s and answers everything at once from its end, swept here from 0.9s
// to just before the loss time (2.918s). Every case keeps the lease. The
// watchdog used to count the stalled attempt's whole duration as the
// round trip and its lateness as overload, and then set the lease aside as
// hopeless for good: stalls ending from about 2.64s on lost it with
// ErrBehind although Redis answered at once.
func TestStallAnsweredInTimeKeepsTheLease(t *testing.T) {
	const ttl = 3 * time.Second
	loss := ttl - drift(ttl) - watchdog.DefaultSlack(ttl)
	for end := 900 * time.Millisecond; end < loss-10*time.Millisecond; end += 20 * time.Millisecond {
		t.Run(fmt.Sprint("until=", end), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				w := watchdog.New[string](stalled{from: start.Add(900 * time.Millisecond), to: start.Add(end)}, watchdog.Config{Drift: drift})
				defer w.Close()
				lost := make(chan error, 1)
				if _, err := w.Add("x", ttl, start, ttl/3, true, watchdog.LostFunc(func(err error) { lost <- err })); err != nil {
					t.Fatal(err)
				}
				time.Sleep(4 * ttl)
				noLoss(t, lost, fmt.Sprintf("a stall from 0.9s to %v", end))
			})
		})
	}
}

// L1 for a re-dial: every connection closed (a proxy restart, an idle
// timeout), the script cache kept, at a round trip R from 0 to the largest
// that docs/design.md's table allows at TTL 3s (639ms: HELLO, CLIENT
// SETINFO and EVALSHA, three round trips within the 1.918s a renewal has),
// then warm. The first renewals dial too: the pool starts empty. Every R keeps every lease. At 600ms the lease used to be lost
// to the same wrong verdict of "hopeless" as a stall.
func TestRedialKeepsLeases(t *testing.T) {
	for _, r := range []time.Duration{0, 40, 80, 120, 160, 200, 240, 280, 320, 360, 400, 440, 480, 520, 560, 600, 639} {
		r *= time.Millisecond
		t.Run(fmt.Sprint("rtt=", r), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &link{rtt: r, dialTrips: 2}
				w := watchdog.New[string](l, watchdog.Config{Drift: drift})
				defer w.Close()
				lost := holdOn(t, w, 3, 3*time.Second)
				time.Sleep(5 * time.Second)
				noLoss(t, lost, "warm")
				l.redial()
				time.Sleep(20 * time.Second)
				noLoss(t, lost, fmt.Sprintf("a re-dial at %v round trips", r))
			})
		})
	}
}

// deaf is a Renewer that does not end a call when its context does, as
// go-redis does without ContextTimeoutEnabled until its ReadTimeout: each
// call returns only when the test lets it.
type deaf struct {
	mu      sync.Mutex
	release chan struct{}
	calls   int
	ended   int
}

func (d *deaf) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	<-d.release
	for i := range errs {
		errs[i] = fmt.Errorf("read tcp: i/o timeout")
	}
	d.mu.Lock()
	d.ended++
	d.mu.Unlock()
}

func (d *deaf) running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls - d.ended
}

// An attempt ends at its deadline whatever the Renewer does with its
// context: the worker goes on (the lease is lost at its loss time as
// unanswered, not as overload), and Close returns while the attempts it
// left are still running.
func TestAttemptEndsAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &deaf{release: make(chan struct{})}
		w := watchdog.New[string](d, watchdog.Config{Drift: drift})
		lost := make(chan error, 2)
		for _, name := range []string{"a", "b"} {
			if _, err := w.Add(name, 3*time.Second, time.Now(), time.Second, true, watchdog.LostFunc(func(err error) { lost <- err })); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			err := <-lost
			if !errors.Is(err, watchdog.ErrExpired) || errors.Is(err, watchdog.ErrBehind) {
				t.Fatalf("lost with %v, want ErrExpired for a renewal sent and never answered", err)
			}
		}
		if d.running() == 0 {
			t.Fatal("no attempt still running at the loss: the test shows nothing")
		}
		closed := make(chan struct{})
		go func() {
			w.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
		default:
			t.Fatal("Close waits for an attempt past its deadline")
		}
		if d.running() == 0 {
			t.Fatal("the attempts ended before Close returned: the test shows nothing")
		}
		close(d.release) // the client's ReadTimeout
		synctest.Wait()
	})
}
