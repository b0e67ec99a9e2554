package watchdog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/watchdog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// loss records one lease's loss.
type loss struct {
	mu     sync.Mutex
	reason error
	at     time.Time
	calls  int
}

func (l *loss) record(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reason, l.at = reason, time.Now()
	l.calls++
}

func (l *loss) get() (at time.Time, calls int, reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at, l.calls, l.reason
}

// hold acquires name on be and puts it under w.
func hold(t *testing.T, w *watchdog.Watchdog[backend.Item], be backend.Backend, name string, ttl, interval time.Duration) (*watchdog.Entry[backend.Item], *loss) {
	t.Helper()
	tok := "tok-" + name
	sent := time.Now()
	res, err := be.Acquire(context.Background(), backend.Request{Name: name, Token: tok, TTL: ttl})
	if err != nil || !res.Acquired {
		t.Fatalf("acquire %s: %v %+v", name, err, res)
	}
	l := &loss{}
	e, err := w.Add(backend.Item{Name: name, Token: tok}, ttl, sent, interval, true, watchdog.LostFunc(l.record))
	if err != nil {
		t.Fatal(err)
	}
	return e, l
}

func TestRenewalKeepsLeaseAliveAcrossManyTTLs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift})
		defer w.Close()
		e, l := hold(t, w, fake, "a", 3*time.Second, time.Second)

		time.Sleep(30 * time.Second) // ten TTLs
		if _, _, reason := l.get(); reason != nil {
			t.Fatalf("lost: %v", reason)
		}
		if _, ttl, ok := fake.Holder("a"); !ok || ttl < 2*time.Second {
			t.Fatalf("server TTL %v held %v", ttl, ok)
		}
		// Renewed every interval: 30 renewals in 30s (one per round).
		if n := fake.Calls("renew"); n < 29 || n > 31 {
			t.Fatalf("renew calls = %d, want ~30", n)
		}
		// The deadline follows the last renewal's send time.
		if d := time.Until(e.Deadline()); d <= time.Second || d > 3*time.Second-drift(3*time.Second) {
			t.Fatalf("deadline in %v", d)
		}
	})
}

func TestTakeoverLosesWithinOneInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift})
		defer w.Close()
		_, l := hold(t, w, fake, "a", 3*time.Second, time.Second)

		time.Sleep(1500 * time.Millisecond)
		taken := time.Now()
		fake.Set("a", "intruder", time.Minute)
		time.Sleep(2 * time.Second)
		at, calls, reason := l.get()
		if !errors.Is(reason, watchdog.ErrTakenOver) || calls != 1 {
			t.Fatalf("reason %v calls %d", reason, calls)
		}
		if at.Sub(taken) > time.Second {
			t.Fatalf("loss detected %v after takeover, more than one interval", at.Sub(taken))
		}
		if tok, _, _ := fake.Holder("a"); tok != "intruder" {
			t.Fatalf("holder %q", tok)
		}
	})
}

func TestUnansweredRenewalsLoseAtLocalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift})
		defer w.Close()
		e, l := hold(t, w, fake, "a", 3*time.Second, time.Second)
		time.Sleep(2500 * time.Millisecond) // renewed at 1s and 2s
		deadline := e.Deadline()
		fake.SetHang(true) // a paused server: no reply, no error
		time.Sleep(5 * time.Second)

		at, _, reason := l.get()
		if !errors.Is(reason, watchdog.ErrExpired) {
			t.Fatalf("reason %v", reason)
		}
		// Lost a slack before the deadline, so that a late timer still
		// cancels by it.
		if want := deadline.Add(-watchdog.DefaultSlack(3 * time.Second)); !at.Equal(want) {
			t.Fatalf("lost at %v, deadline %v: want the slack before it, %v", at, deadline, want)
		}
		// The server still had the key when the holder gave up.
		if _, ttl, ok := fake.Holder("a"); ok && ttl < 0 {
			t.Fatalf("ttl %v", ttl)
		}
		if want := 2*time.Second + 3*time.Second - drift(3*time.Second); at.Sub(deadline.Add(-want)) < 0 {
			t.Fatalf("deadline %v earlier than expected", deadline)
		}
	})
}

func TestFailedRenewalsRetryUntilDeadlineAndRecover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift})
		defer w.Close()
		e, l := hold(t, w, fake, "a", 3*time.Second, time.Second)
		start := e.Deadline()
		fake.SetFault(func(op string) error { return errors.New("connection refused") })
		time.Sleep(1800 * time.Millisecond)
		if !e.Deadline().Equal(start) {
			t.Fatal("a failed renewal moved the deadline")
		}
		failed := fake.Calls("renew")
		if failed < 3 {
			t.Fatalf("only %d attempts in 0.8s of failures: no retry", failed)
		}
		fake.SetFault(nil)
		time.Sleep(10 * time.Second)
		if _, _, reason := l.get(); reason != nil {
			t.Fatalf("lost after recovery: %v", reason)
		}
		if !e.Deadline().After(start) {
			t.Fatal("deadline did not move after recovery")
		}
	})
}

// slow delays every call, as a slow network does, before the server applies it.
type slow struct {
	backend.Backend
	delay time.Duration
}

func (s slow) Renew(ctx context.Context, items []backend.Item, errs []error) {
	time.Sleep(s.delay)
	s.Backend.Renew(ctx, items, errs)
}

func TestDeadlineCountsFromSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		be := slow{fake, 400 * time.Millisecond}
		w := watchdog.New(backend.Renewer(be), watchdog.Config{Drift: drift})
		defer w.Close()
		ttl := 3 * time.Second
		e, _ := hold(t, w, fake, "a", ttl, time.Second)
		// First renewal sent at 1s, answered at 1.4s.
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		sent := time.Now().Add(-500 * time.Millisecond)
		if got, want := e.Deadline(), sent.Add(ttl-drift(ttl)); !got.Equal(want) {
			t.Fatalf("deadline %v, want send+ttl-drift %v", got, want)
		}
	})
}

// applyThenFail applies renewals but reports a timeout, as a reply lost on
// the way back does.
type applyThenFail struct{ *backend.Fake }

func (a applyThenFail) Renew(ctx context.Context, items []backend.Item, errs []error) {
	a.Fake.Renew(ctx, items, errs)
	fill := context.DeadlineExceeded
	for i := range errs {
		errs[i] = fill
	}
}

func TestTimedOutRenewalNeverMovesDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(applyThenFail{fake}), watchdog.Config{Drift: drift})
		defer w.Close()
		e, l := hold(t, w, fake, "a", 3*time.Second, time.Second)
		deadline := e.Deadline()
		time.Sleep(5 * time.Second)
		at, _, reason := l.get()
		if !errors.Is(reason, watchdog.ErrExpired) || !at.Equal(deadline.Add(-watchdog.DefaultSlack(3*time.Second))) {
			t.Fatalf("reason %v at %v, deadline %v", reason, at, deadline)
		}
	})
}

func TestLateReplyAfterDeadlineDoesNotResurrect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		be := slow{fake, 5 * time.Second} // answers long after the deadline
		w := watchdog.New(backend.Renewer(be), watchdog.Config{Drift: drift})
		defer w.Close()
		e, l := hold(t, w, fake, "a", 3*time.Second, time.Second)
		time.Sleep(10 * time.Second)
		_, calls, reason := l.get()
		if !errors.Is(reason, watchdog.ErrExpired) || calls != 1 {
			t.Fatalf("reason %v calls %d", reason, calls)
		}
		if err := w.Remove(e); !errors.Is(err, watchdog.ErrExpired) {
			t.Fatalf("Remove after loss = %v", err)
		}
	})
}

func TestBatchesShareRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift, BatchSize: 1000})
		defer w.Close()
		const n = 10_000
		losses := make([]*loss, n)
		for i := range n {
			_, losses[i] = hold(t, w, fake, fmt.Sprint("lease-", i), 30*time.Second, 10*time.Second)
			if i%1000 == 999 {
				time.Sleep(time.Second / 4) // spread over 2.5s, a quarter of an interval
			}
		}
		before := fake.Calls("renew")
		time.Sleep(35 * time.Second) // at least three rounds
		rounds := fake.Calls("renew") - before
		// 10,000 leases in batches of 1000, acquired within a quarter
		// interval: 10 round trips a round, 3 or 4 rounds, not 10,000.
		if rounds > 4*n/1000+20 {
			t.Fatalf("%d renewal round trips for %d leases over ~3 rounds", rounds, n)
		}
		for i, l := range losses {
			if _, _, reason := l.get(); reason != nil {
				t.Fatalf("lease %d lost: %v", i, reason)
			}
		}
	})
}

func TestRemoveStopsRenewalAndLossCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift})
		defer w.Close()
		e, l := hold(t, w, fake, "a", 3*time.Second, time.Second)
		if err := w.Remove(e); err != nil {
			t.Fatal(err)
		}
		n := fake.Calls("renew")
		time.Sleep(10 * time.Second)
		if fake.Calls("renew") != n {
			t.Fatal("renewed after Remove")
		}
		if _, calls, _ := l.get(); calls != 0 {
			t.Fatal("loss reported after Remove")
		}
	})
}

func TestNoRenewLeaseLosesAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift})
		defer w.Close()
		sent := time.Now()
		_, _ = fake.Acquire(context.Background(), backend.Request{Name: "a", Token: "t", TTL: 3 * time.Second})
		l := &loss{}
		e, _ := w.Add(backend.Item{Name: "a", Token: "t"}, 3*time.Second, sent, time.Second, false, watchdog.LostFunc(l.record))
		time.Sleep(10 * time.Second)
		at, _, reason := l.get()
		if !errors.Is(reason, watchdog.ErrExpired) || !at.Equal(e.Deadline().Add(-watchdog.DefaultSlack(3*time.Second))) || fake.Calls("renew") != 0 {
			t.Fatalf("reason %v at %v deadline %v renewals %d", reason, at, e.Deadline(), fake.Calls("renew"))
		}
	})
}

func TestExtendedMovesDeadlineForwardOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift})
		defer w.Close()
		e, _ := hold(t, w, fake, "a", 3*time.Second, time.Second)
		d0 := e.Deadline()
		if err := w.Extended(e, time.Now(), time.Second, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if !e.Deadline().Equal(d0) {
			t.Fatal("a shorter extension moved the deadline back")
		}
		if err := w.Extended(e, time.Now(), 10*time.Second, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		if want := time.Now().Add(10*time.Second - drift(10*time.Second)); !e.Deadline().Equal(want) {
			t.Fatalf("deadline %v want %v", e.Deadline(), want)
		}
	})
}

func TestCloseReturnsHeldAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(fake), watchdog.Config{Drift: drift})
		_, l1 := hold(t, w, fake, "a", 3*time.Second, time.Second)
		e2, _ := hold(t, w, fake, "b", 3*time.Second, time.Second)
		_ = w.Remove(e2)
		held := w.Close()
		if len(held) != 1 || held[0].Name != "a" {
			t.Fatalf("held %+v", held)
		}
		if _, err := w.Add(backend.Item{Name: "c"}, time.Second, time.Now(), 300*time.Millisecond, true, watchdog.LostFunc(func(error) {})); !errors.Is(err, watchdog.ErrClosed) {
			t.Fatalf("Add after Close: %v", err)
		}
		time.Sleep(10 * time.Second)
		if _, calls, _ := l1.get(); calls != 0 {
			t.Fatal("loss reported after Close")
		}
		if w.Close() != nil {
			t.Fatal("second Close returned leases")
		}
	})
}

// A renewal in flight when Extended raised the TTL is credited with the TTL
// it carried, not the new one: the server only promised the old one from
// that send.
func TestInFlightRenewalCountsForTheTTLItCarried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		w := watchdog.New(backend.Renewer(slow{fake, 500 * time.Millisecond}), watchdog.Config{Drift: func(time.Duration) time.Duration { return 0 }})
		defer w.Close()
		e, _ := hold(t, w, fake, "a", 3*time.Second, time.Second)
		time.Sleep(1100 * time.Millisecond) // a renewal with TTL 3s left at 1s
		// An Extend sent at 0.5s with a 10s TTL succeeded meanwhile.
		extSent := time.Now().Add(-600 * time.Millisecond)
		if err := w.Extended(e, extSent, 10*time.Second, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the renewal's reply arrives at 1.5s
		if want := extSent.Add(10 * time.Second); !e.Deadline().Equal(want) {
			t.Fatalf("deadline %v after the old renewal's reply, want %v (the extend's)", e.Deadline(), want)
		}
	})
}

// lightLog records, for every renewal, when it was sent, when its context
// ended and whether it was light.
type lightLog struct {
	backend.Backend
	mu   sync.Mutex
	sent map[string][]lightRenewal
}

type lightRenewal struct {
	at, until time.Time
	light     bool
}

func (l *lightLog) Renew(ctx context.Context, items []backend.Item, errs []error) {
	until, _ := ctx.Deadline()
	l.mu.Lock()
	for _, it := range items {
		l.sent[it.Name] = append(l.sent[it.Name], lightRenewal{time.Now(), until, it.Light})
	}
	l.mu.Unlock()
	l.Backend.Renew(ctx, items, errs)
}

// A light renewal (one that may leave the fencing counter be) is sent only
// while the last full one, or the acquisition, was sent at most a TTL
// before the light one's context ends: the counter that one gave twice the
// TTL then outlives the lease this one extends, wherever the server runs it
// in that time.
func TestLightRenewalsWithinATTLOfAFullOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &lightLog{Backend: backend.NewFake(), sent: map[string][]lightRenewal{}}
		w := watchdog.New(backend.Renewer(log), watchdog.Config{Drift: drift})
		defer w.Close()
		const ttl = 3 * time.Second
		added := map[string]time.Time{}
		for i := range 5 {
			name := fmt.Sprint("lease-", i)
			added[name] = time.Now()
			hold(t, w, log, name, ttl, time.Duration(i+1)*ttl/6) // intervals from ttl/6 to 5ttl/6
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(10 * ttl)
		log.mu.Lock()
		defer log.mu.Unlock()
		var light, full int
		for name, rs := range log.sent {
			lastFull := added[name]
			for _, r := range rs {
				if !r.light {
					full++
					lastFull = r.at
					continue
				}
				light++
				if r.until.Sub(lastFull) > ttl {
					t.Errorf("%s: light renewal at %v ends %v after the last full one", name, r.at, r.until.Sub(lastFull))
				}
			}
		}
		if light == 0 || full == 0 {
			t.Fatalf("%d light and %d full renewals: want both", light, full)
		}
	})
}
