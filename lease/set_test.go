package lease_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Many goroutines, on two managers, take random overlapping sets of names
// given in random orders: no name ever has two holders, fences of a name
// grow in the order its holders came in, and nobody deadlocks (every
// AcquireAll returns within a generous bound; a deadlock would hold until
// it).
func TestAcquireAllOverlappingSets(t *testing.T) {
	srv := redistest.Start(t)
	ms := []*lease.Manager{newManager(t, srv.Client(t)), newManager(t, srv.Client(t))}
	names := []string{"acct:1", "acct:2", "acct:3", "acct:4", "acct:5"}
	var mu sync.Mutex
	holders := map[string]int{}
	last := map[string]int64{}
	const workers, rounds = 8, 15
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			m := ms[w%2]
			for range rounds {
				set := rand.Perm(len(names))[:2+rand.IntN(3)]
				want := make([]string, len(set))
				for i, k := range set {
					want[i] = names[k]
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				s, err := m.AcquireAll(ctx, want)
				cancel()
				if err != nil {
					t.Errorf("AcquireAll(%v): %v", want, err)
					return
				}
				mu.Lock()
				for _, n := range want {
					holders[n]++
					if holders[n] > 1 {
						t.Errorf("%s has %d holders", n, holders[n])
					}
					if f := s.Fence(n); f <= last[n] {
						t.Errorf("%s: fence %d after %d", n, f, last[n])
					} else {
						last[n] = f
					}
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				for _, n := range want {
					holders[n]--
				}
				mu.Unlock()
				if err := s.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
}

// TryAcquireAll is all or none: one name held by another leaves the
// others free.
func TestTryAcquireAllAllOrNone(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	other := newManager(t, srv.Client(t))
	ctx := context.Background()
	held, err := other.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.TryAcquireAll(ctx, []string{"c", "b", "a"})
	if !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryAcquireAll with b held: %v, want ErrNotAcquired", err)
	}
	if n := raw.Exists(ctx, "tenure:{a}", "tenure:{c}").Val(); n != 0 {
		t.Fatalf("%d of a and c still held after the set failed", n)
	}
	// A waiting AcquireAll that runs out of time leaves nothing either.
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = m.AcquireAll(wctx, []string{"c", "b", "a"})
	cancel()
	if !errors.Is(err, lease.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcquireAll with b held until the deadline: %v", err)
	}
	if n := raw.Exists(ctx, "tenure:{a}", "tenure:{c}").Val(); n != 0 {
		t.Fatalf("%d of a and c still held after the wait ran out", n)
	}
	_ = held.Release(ctx)
	s, err := m.TryAcquireAll(ctx, []string{"c", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Names()); got != "[a b c]" {
		t.Errorf("Names() = %s, want [a b c]", got)
	}
	for _, n := range []string{"a", "b", "c"} {
		if s.Lease(n) == nil || s.Fence(n) <= 0 {
			t.Errorf("%s: lease %v fence %d", n, s.Lease(n), s.Fence(n))
		}
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, "tenure:{a}", "tenure:{b}", "tenure:{c}").Val(); n != 0 {
		t.Fatalf("%d names still held after Release", n)
	}
	if !errors.Is(s.Err(), lease.ErrReleased) {
		t.Errorf("Err after Release: %v", s.Err())
	}
}

// The Set's context ends with the first member lost, with ErrLost; the
// other members are still released by Release.
func TestSetContextEndsWithAnyLoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second))
	ctx := context.Background()
	s, err := m.AcquireAll(ctx, []string{"x", "y", "z"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	raw.Del(ctx, "tenure:{y}")
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the set's context outlived the loss of y")
	}
	if !errors.Is(context.Cause(s.Context()), lease.ErrLost) || !errors.Is(s.Err(), lease.ErrLost) {
		t.Fatalf("cause %v, Err %v: want ErrLost", context.Cause(s.Context()), s.Err())
	}
	// The cause names the member lost: which of the names matters.
	if got, want := s.Err().Error(), `"y": lease: lost`; got != want {
		t.Fatalf("the set's cause says %q, want %q", got, want)
	}
	if s.Lease("x").Err() != nil || s.Lease("z").Err() != nil {
		t.Fatal("x or z ended with y")
	}
	_ = s.Release(ctx)
	if n := raw.Exists(ctx, "tenure:{x}", "tenure:{z}").Val(); n != 0 {
		t.Fatalf("%d of x and z still held after Release", n)
	}
}

// The Set's context is done by the time a member's is: a member's end
// cancels it first, in the same call, whether the member is lost or
// released on its own; and Set.Release ends it before it releases any
// member, so another holder that takes a member's name finds it done.
// Judged by order, from the manager's hooks, which run synchronously: at
// each member's end (Ended, right after the member's context is
// cancelled) and at each release Set.Release starts (ReleaseStart, before
// the delete), the Set's context must be done already.
func TestSetContextEndsBeforeItsMembers(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	var (
		cur   atomic.Pointer[lease.Set]
		whole atomic.Bool // within Set.Release
		mu    sync.Mutex
		live  []string
	)
	check := func(what string, l *lease.Lease) {
		s := cur.Load()
		if s == nil || s.Lease(l.Name()) != l {
			return
		}
		select {
		case <-s.Done():
		default:
			mu.Lock()
			live = append(live, what+" "+l.Name())
			mu.Unlock()
		}
	}
	hooks := lease.Hooks{
		ReleaseStart: func(ctx context.Context, l *lease.Lease) context.Context {
			if whole.Load() {
				check("Set.Release's release of", l)
			}
			return ctx
		},
		Ended: func(l *lease.Lease, _ lease.EndInfo) { check("the end of", l) },
	}
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second), lease.WithHooks(hooks))
	other := newManager(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	take := func() *lease.Set {
		t.Helper()
		s, err := m.AcquireAll(ctx, []string{"x", "y", "z"})
		if err != nil {
			t.Fatal(err)
		}
		cur.Store(s)
		return s
	}
	release := func(s *lease.Set) {
		whole.Store(true)
		defer whole.Store(false)
		_ = s.Release(ctx)
	}

	s := take() // a member lost
	raw.Del(ctx, "tenure:{y}")
	waitDone(t, s.Lease("y"), time.Second)
	if !errors.Is(s.Err(), lease.ErrLost) {
		t.Fatalf("the set ended with %v after y was lost", s.Err())
	}
	release(s)
	s = take() // a member released on its own
	_ = s.Lease("x").Release(ctx)
	if !errors.Is(s.Err(), lease.ErrReleased) {
		t.Fatalf("the set ended with %v after x was released", s.Err())
	}
	release(s)
	s = take() // the Set released, another waiting for a member
	got := make(chan error, 1)
	go func() {
		l, err := other.Acquire(ctx, "z")
		if err == nil {
			select {
			case <-s.Done():
			default:
				err = errors.New("z was taken while the set's context was live")
			}
			_ = l.Release(ctx)
		}
		got <- err
	}()
	release(s)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, what := range live {
		t.Errorf("the set's context was live at %s", what)
	}
}

// A name lost while AcquireAll waits for a later one ends the wait.
func TestAcquireAllLossWhileWaiting(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second))
	other := newManager(t, srv.Client(t))
	ctx := context.Background()
	held, err := other.Acquire(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := m.AcquireAll(ctx, []string{"q", "p"}) // p first, then waits for q
		done <- err
	}()
	for raw.Exists(ctx, "tenure:{p}").Val() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	raw.Del(ctx, "tenure:{p}")
	select {
	case err := <-done:
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("AcquireAll after p was lost: %v, want ErrLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("AcquireAll kept waiting for q after p was lost")
	}
}

func TestAcquireAllBadInput(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	for _, names := range [][]string{nil, {}, {"a", "b", "a"}} {
		if _, err := m.AcquireAll(context.Background(), names); !errors.Is(err, lease.ErrInvalidOption) {
			t.Errorf("AcquireAll(%q): %v, want ErrInvalidOption", names, err)
		}
	}
	if _, err := m.AcquireAll(context.Background(), []string{"ok", ""}); !errors.Is(err, lease.ErrInvalidName) {
		t.Errorf("AcquireAll with an empty name: %v, want ErrInvalidName", err)
	}
	if err := m.DoAll(context.Background(), []string{"a"}, nil); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("DoAll(nil fn): %v", err)
	}
}

// On a Cluster the names of a set live in different slots: taken in
// order all the same.
func TestAcquireAllCluster(t *testing.T) {
	c := redistest.NewCluster(t, 3, 0)
	m := newManager(t, c.Client(t))
	var ran bool
	err := m.DoAll(context.Background(), []string{"one", "two", "three", "four"}, func(ctx context.Context) error {
		ran = ctx.Err() == nil
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("DoAll on a Cluster: %v (ran %v)", err, ran)
	}
}

// The function DoAll runs reaches its Set, and so each name's fence,
// through SetFromContext; outside a Set's context there is none.
func TestDoAllReachesTheSet(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	if _, ok := lease.SetFromContext(ctx); ok {
		t.Fatal("a Set found in a plain context")
	}
	names := []string{"account:2", "account:1"}
	err := m.DoAll(ctx, names, func(ctx context.Context) error {
		s, ok := lease.SetFromContext(ctx)
		if !ok {
			return errors.New("no Set in DoAll's context")
		}
		for _, n := range names {
			l := s.Lease(n)
			if l == nil || l.Err() != nil || s.Fence(n) <= 0 || s.Fence(n) != l.Fence() {
				return fmt.Errorf("%q: lease %v, fence %d", n, l, s.Fence(n))
			}
		}
		if _, ok := lease.FromContext(ctx); ok {
			return errors.New("FromContext found a lease in a Set's context, which holds several")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
