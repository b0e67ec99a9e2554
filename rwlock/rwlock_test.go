package rwlock_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

var quiet = slog.New(slog.DiscardHandler)

func newLocker(t testing.TB, c redis.UniversalClient, opts ...lease.Option) *rwlock.Locker {
	t.Helper()
	m, err := lease.New(c, append([]lease.Option{lease.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return rwlock.New(m)
}

// state checks "many readers or one writer" over the locks' contexts: a
// lock counts from when it is acquired until its context ends.
type state struct {
	t                       *testing.T
	readers, writers        atomic.Int64
	maxReaders, writersSeen atomic.Int64
}

func (s *state) enter(l *lease.Lease, write bool) func() {
	var once sync.Once
	var end func()
	if write {
		if w := s.writers.Add(1); w > 1 {
			s.t.Errorf("%d writers at once", w)
		}
		if r := s.readers.Load(); r > 0 {
			s.t.Errorf("a writer beside %d readers", r)
		}
		s.writersSeen.Add(1)
		end = func() { once.Do(func() { s.writers.Add(-1) }) }
	} else {
		r := s.readers.Add(1)
		if w := s.writers.Load(); w > 0 {
			s.t.Errorf("a reader beside a writer")
		}
		for {
			if old := s.maxReaders.Load(); r <= old || s.maxReaders.CompareAndSwap(old, r) {
				break
			}
		}
		end = func() { once.Do(func() { s.readers.Add(-1) }) }
	}
	stop := context.AfterFunc(l.Context(), end)
	return func() { stop(); end() }
}

func TestReadersShareWritersExclude(t *testing.T) {
	srv := redistest.Start(t)
	var lockers []*rwlock.Locker
	for range 3 {
		lockers = append(lockers, newLocker(t, srv.Client(t)))
	}
	s := &state{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 9 {
		wg.Go(func() {
			k := lockers[w%len(lockers)]
			for i := range 12 {
				write := (w+i)%4 == 0
				var l *lease.Lease
				var err error
				if write {
					l, err = k.Lock(ctx, "doc")
				} else {
					l, err = k.RLock(ctx, "doc")
				}
				if err != nil {
					t.Error(err)
					return
				}
				leave := s.enter(l, write)
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				leave()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if s.maxReaders.Load() < 2 || s.writersSeen.Load() == 0 {
		t.Fatalf("at most %d readers at once, %d writers: the test did not contend", s.maxReaders.Load(), s.writersSeen.Load())
	}
}

// A stream of overlapping readers, never leaving the lock free, does not
// starve a writer: once it waits, new readers wait behind it. The readers
// are a relay: each next read lock is taken before the current one is
// let go, for up to 10 s, and a read lock refused within 300 ms ends the
// relay. The writer must end it: were readers let in past a waiting writer,
// the relay would run its course first.
func TestWriterNotStarvedByReaders(t *testing.T) {
	srv := redistest.Start(t)
	readers := newLocker(t, srv.Client(t))
	writer := newLocker(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first, err := readers.RLock(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	var laps atomic.Int64
	ended := make(chan string, 1)
	go func() {
		cur := first
		defer func() { _ = cur.Release(ctx) }()
		course := time.After(10 * time.Second)
		for {
			select {
			case <-course:
				ended <- "ran its course: the writer waited behind readers all along"
				return
			default:
			}
			tctx, tcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			next, err := readers.RLock(tctx, "hot")
			tcancel()
			if err != nil {
				ended <- "refused"
				return
			}
			_ = cur.Release(ctx)
			cur = next
			laps.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	for laps.Load() < 5 {
		time.Sleep(5 * time.Millisecond)
	}
	w, err := writer.Lock(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	if why := <-ended; why != "refused" {
		t.Fatalf("the relay of readers %s", why)
	}
}

func TestTryLocks(t *testing.T) {
	srv := redistest.Start(t)
	k := newLocker(t, srv.Client(t))
	ctx := context.Background()
	r1, err := k.TryRLock(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := k.TryRLock(ctx, "t")
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if _, err := k.TryLock(ctx, "t"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a writer beside readers: %v", err)
	}
	// A writer waiting keeps new readers out.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan *lease.Lease, 1)
	go func() {
		w, err := k.Lock(wctx, "t")
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	raw := srv.Client(t)
	for raw.ZCard(ctx, "tenure:{t}:queue").Val() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := k.TryRLock(ctx, "t"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a reader while a writer waits: %v", err)
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w := <-got
	if w == nil {
		t.FailNow()
	}
	if w.Fence() <= r2.Fence() || w.Fence() <= r1.Fence() {
		t.Fatalf("the writer's fence %d is not above the readers' %d, %d", w.Fence(), r1.Fence(), r2.Fence())
	}
	if _, err := k.TryRLock(ctx, "t"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a reader beside the writer: %v", err)
	}
	if _, err := k.TryLock(ctx, "t"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a second writer: %v", err)
	}
	_ = w.Release(ctx)
	if r, err := k.TryRLock(ctx, "t"); err != nil {
		t.Fatalf("a reader after the writer: %v", err)
	} else {
		_ = r.Release(ctx)
	}
}

func TestNoUpgradeNoReentry(t *testing.T) {
	srv := redistest.Start(t)
	k := newLocker(t, srv.Client(t))
	other := newLocker(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := k.RLock(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	under := r.Context()
	if _, err := k.Lock(under, "u"); !errors.Is(err, rwlock.ErrUpgrade) {
		t.Fatalf("Lock under a read lock: %v", err)
	}
	if _, err := k.RLock(under, "u"); !errors.Is(err, rwlock.ErrReentry) {
		t.Fatalf("RLock under a read lock: %v", err)
	}
	// Another name, or another manager's Locker, is no upgrade.
	if l, err := k.TryLock(under, "v"); err != nil {
		t.Fatalf("Lock of another name under a read lock: %v", err)
	} else {
		_ = l.Release(ctx)
	}
	if _, err := other.TryLock(under, "u"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("another Locker's TryLock: %v", err)
	}
	_ = r.Release(ctx)
	// Once released, the context (without its cancellation) no longer
	// holds it.
	w, err := k.TryLock(context.WithoutCancel(under), "u")
	if err != nil {
		t.Fatalf("Lock under a released read lock's context: %v", err)
	}
	for _, try := range []func(context.Context, string, ...lease.AcquireOption) (*lease.Lease, error){k.Lock, k.RLock} {
		if _, err := try(w.Context(), "u"); !errors.Is(err, rwlock.ErrReentry) {
			t.Fatalf("under a write lock: %v", err)
		}
	}
	_ = w.Release(ctx)
}

// Readers and a writer lose their locks by partition before anyone else
// is let in.
func TestLossByPartition(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = cut.Close() })
	ttl := time.Second
	a := newLocker(t, cut, lease.WithTTL(ttl), lease.WithOpTimeout(200*time.Millisecond))
	b := newLocker(t, srv.Client(t), lease.WithTTL(ttl))
	ctx := context.Background()

	r, err := a.RLock(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.Lock(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole(true)
	defer proxy.BlackHole(false)
	for _, c := range []struct {
		held   *lease.Lease
		take   func(context.Context, string, ...lease.AcquireOption) (*lease.Lease, error)
		reader bool
	}{{r, b.Lock, true}, {w, b.RLock, false}, {w, b.Lock, false}} {
		got, err := c.take(ctx, c.held.Name())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.held.Done():
		default:
			t.Fatalf("%s taken while the partitioned holder's context was live", c.held.Name())
		}
		if !errors.Is(context.Cause(c.held.Context()), lease.ErrLost) {
			t.Fatalf("cause %v", context.Cause(c.held.Context()))
		}
		if got.Fence() <= c.held.Fence() {
			t.Fatalf("fence %d after %d", got.Fence(), c.held.Fence())
		}
		_ = got.Release(ctx)
	}
}

// TestTryLockSaysReaders: a writer refused while readers hold the name is
// told so, on a Redis server and on the in-memory one (lease/leasetest).
// It said "is held by another holder".
func TestTryLockSaysReaders(t *testing.T) {
	check := func(t *testing.T, k *rwlock.Locker) {
		ctx := context.Background()
		r, err := k.TryRLock(ctx, "said")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release(ctx)
		_, err = k.TryLock(ctx, "said")
		if !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), "held by readers") {
			t.Errorf("TryLock beside a reader: %v", err)
		}
	}
	t.Run("redis", func(t *testing.T) { check(t, newLocker(t, redistest.Start(t).Client(t))) })
	t.Run("leasetest", func(t *testing.T) {
		m, err := leasetest.NewServer().NewManager(lease.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		check(t, rwlock.New(m))
	})
}
