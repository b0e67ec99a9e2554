package leasetest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/reentrant"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ends records each lease's EndInfo.
type ends struct {
	mu   sync.Mutex
	info map[string]lease.EndInfo
}

func (e *ends) hooks() lease.Hooks {
	return lease.Hooks{Ended: func(l *lease.Lease, info lease.EndInfo) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.info[l.Name()] = info
	}}
}

func (e *ends) of(name string) lease.EndInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info[name]
}

func manager(t *testing.T, srv *leasetest.Server, opts ...lease.Option) *lease.Manager {
	t.Helper()
	m, err := srv.NewManager(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// Each way of losing a lease on demand ends its context with ErrLost and
// the reason a Redis would give, at the moment the watchdog would find it:
// the next renewal, or the local deadline when the server is unreachable,
// which comes before the server's TTL runs out.
func TestLossOnDemand(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(srv *leasetest.Server, name string)
		want lease.LossReason
	}{
		{"delete", func(srv *leasetest.Server, n string) { srv.Delete(n) }, lease.LossDeleted},
		{"take over", func(srv *leasetest.Server, n string) { srv.TakeOver(n, time.Minute) }, lease.LossTakenOver},
		{"unreachable", func(srv *leasetest.Server, n string) { srv.SetUnreachable(true) }, lease.LossExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := leasetest.NewServer()
				e := &ends{info: map[string]lease.EndInfo{}}
				const ttl = 3 * time.Second
				m := manager(t, srv, lease.WithTTL(ttl), lease.WithHooks(e.hooks()))
				l, err := m.Acquire(context.Background(), "job")
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(ttl) // renewed meanwhile
				if l.Err() != nil {
					t.Fatalf("lost while nothing happened: %v", l.Err())
				}
				tc.lose(srv, "job")
				lostAt := time.Now()
				<-l.Done()
				synctest.Wait()
				if cause := context.Cause(l.Context()); !errors.Is(cause, lease.ErrLost) {
					t.Fatalf("cause %v, want ErrLost", cause)
				}
				if got := e.of("job").Loss; got != tc.want {
					t.Fatalf("loss reason %q, want %q", got, tc.want)
				}
				if took := time.Since(lostAt); took > ttl {
					t.Fatalf("found %v after the loss (TTL %v)", took, ttl)
				}
				if tc.want == lease.LossExpired {
					// Before the server could give the name away.
					if held, left := srv.Holder("job"); !held || left <= 0 {
						t.Fatalf("the context ended after the server's TTL (held %v, %v left)", held, left)
					}
					srv.SetUnreachable(false)
				}
			})
		})
	}
}

// The lease contract, in memory: one holder at a time, fences that grow,
// Release that frees the name at once and then reports ErrNotHeld, Do,
// Close that releases, reentrant locks, fair waiting.
func TestContract(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := leasetest.NewServer()
		a, b := manager(t, srv), manager(t, srv)
		ctx := context.Background()
		l, err := a.Acquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held name: %v", err)
		}
		done := make(chan *lease.Lease)
		go func() {
			l2, err := b.Acquire(ctx, "job")
			if err != nil {
				t.Error(err)
			}
			done <- l2
		}()
		time.Sleep(5 * time.Second)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("second Release: %v, want ErrNotHeld", err)
		}
		l2 := <-done
		if l2.Fence() <= l.Fence() {
			t.Fatalf("fence %d after %d", l2.Fence(), l.Fence())
		}
		if err := b.Do(ctx, "other", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if held, _ := srv.Holder("job"); held {
			t.Fatal("Close left the lease held")
		}

		lk, err := reentrant.New(a).Lock(ctx, "re")
		if err != nil {
			t.Fatal(err)
		}
		inner, err := reentrant.New(a).Lock(lk.Context(), "re")
		if err != nil {
			t.Fatal(err)
		}
		_ = inner.Unlock(ctx)
		_ = lk.Unlock(ctx)

		f, err := a.Acquire(ctx, "fair", lease.WithFair(true))
		if err != nil {
			t.Fatalf("fair acquire: %v", err)
		}
		_ = f.Release(ctx)
	})
}

// Semaphores in memory, as on Redis: at most n permits, k at once, a
// waiter served when permits are freed, the n that stands while permits
// are held, Available, and a permit lost on demand.
func TestSemaphores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := leasetest.NewServer()
		pa, pb := semaphore.New(manager(t, srv)), semaphore.New(manager(t, srv))
		ctx := context.Background()
		two, err := pa.Acquire(ctx, "pool", 3, semaphore.WithCount(2))
		if err != nil {
			t.Fatal(err)
		}
		if free, err := pb.Available(ctx, "pool", 3); err != nil || free != 1 {
			t.Fatalf("Available with 2 of 3 held: %d %v", free, err)
		}
		if _, err := pb.TryAcquireN(ctx, "pool", 3, 2); !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), "1 of its 3 permits free, 2 asked") {
			t.Fatalf("2 more of 3: %v, want ErrNotAcquired saying 1 of 3 is free", err)
		}
		if _, err := pb.TryAcquire(ctx, "pool", 4); !errors.Is(err, semaphore.ErrLimitMismatch) {
			t.Fatalf("n=4 while held under 3: %v, want ErrLimitMismatch", err)
		}
		got := make(chan *lease.Lease)
		go func() {
			l, err := pb.AcquireN(ctx, "pool", 3, 2)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("granted 2 permits of 3 while 2 were held")
		default:
		}
		if err := two.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-got
		if next.Fence() <= two.Fence() {
			t.Fatalf("fence %d after %d", next.Fence(), two.Fence())
		}
		srv.Delete("pool")
		<-next.Done()
		if cause := context.Cause(next.Context()); !errors.Is(cause, lease.ErrLost) {
			t.Fatalf("a deleted semaphore's permit ended with %v, want ErrLost", cause)
		}
	})
}

// Read-write locks in memory, as on Redis: readers together, a writer
// alone and first (once it waits, new readers wait behind it), Downgrade.
func TestRWLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := leasetest.NewServer()
		la, lb := rwlock.New(manager(t, srv)), rwlock.New(manager(t, srv))
		ctx := context.Background()
		r1, err := la.RLock(ctx, "doc")
		if err != nil {
			t.Fatal(err)
		}
		r2, err := lb.RLock(ctx, "doc")
		if err != nil {
			t.Fatalf("a second reader: %v", err)
		}
		got := make(chan *lease.Lease)
		go func() {
			w, err := lb.Lock(ctx, "doc")
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		if _, err := la.TryRLock(ctx, "doc"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("a reader while a writer waits: %v, want ErrNotAcquired (writers first)", err)
		}
		_ = r1.Release(ctx)
		_ = r2.Release(ctx)
		w := <-got
		if _, err := la.TryRLock(ctx, "doc"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("a reader beside the writer: %v", err)
		}
		r, err := lb.Downgrade(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if r.Fence() <= w.Fence() || !errors.Is(w.Err(), lease.ErrReleased) {
			t.Fatalf("downgraded: fence %d after %d, the writer's end %v", r.Fence(), w.Fence(), w.Err())
		}
		if _, err := la.TryRLock(ctx, "doc"); err != nil {
			t.Fatalf("a reader beside the downgraded reader: %v", err)
		}
		if _, err := la.TryLock(ctx, "doc"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("a writer beside readers: %v", err)
		}
	})
}

// A refused request fails without being applied; Flush forgets every lease
// yet fences keep growing.
func TestFailAndFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := leasetest.NewServer()
		m := manager(t, srv)
		ctx := context.Background()
		refused := errors.New("NOPERM refused")
		srv.Fail(func(op string) error {
			if op == "acquire" {
				return refused
			}
			return nil
		})
		if _, err := m.TryAcquire(ctx, "job"); !errors.Is(err, refused) {
			t.Fatalf("refused acquire: %v", err)
		}
		srv.Fail(nil)
		l, err := m.TryAcquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		srv.Flush()
		time.Sleep(time.Microsecond)
		l2, err := m.TryAcquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if l2.Fence() <= l.Fence() {
			t.Fatalf("fence %d after a flush, not above %d", l2.Fence(), l.Fence())
		}
	})
}

// A user's test written as the README writes a lease (a deferred Release
// with context.Background()), inside testing/synctest, with the server
// unreachable: it ends, the lease lost with ErrLost at its local deadline.
// The deferred Release once waited for ever for an answer from the hung
// server, and the watchdog's timer kept the bubble's clock running, so
// the test never ended.
func TestUnreachableUserTestEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := leasetest.NewServer()
		m, err := srv.NewManager(lease.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		l, err := m.Acquire(context.Background(), "x")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background())
		srv.SetUnreachable(true)
		<-l.Done()
		if cause := context.Cause(l.Context()); !errors.Is(cause, lease.ErrLost) || !errors.Is(l.Err(), lease.ErrLost) {
			t.Fatalf("cause %v, Err %v: want ErrLost", cause, l.Err())
		}
		if now := time.Now(); now.After(l.Deadline()) {
			t.Fatalf("lost %v after the local deadline", now.Sub(l.Deadline()))
		}
	})
}

// Release with a context that never ends, against an unreachable server,
// returns once the manager's op timeout runs out (as a Redis client's read
// timeout ends it), with an error saying the outcome is unknown, whether
// the lease was still held or already lost to its deadline. Times are the
// bubble's fake clock.
func TestUnreachableReleaseBoundedByOpTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []lease.Option
		opTimeout time.Duration
	}{
		{"default op timeout", nil, 5 * time.Second},
		{"WithOpTimeout", []lease.Option{lease.WithOpTimeout(2 * time.Second)}, 2 * time.Second},
	} {
		t.Run(tc.name+"/held", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := leasetest.NewServer()
				m := manager(t, srv, append([]lease.Option{lease.WithTTL(time.Minute)}, tc.opts...)...)
				l, err := m.Acquire(context.Background(), "job")
				if err != nil {
					t.Fatal(err)
				}
				srv.SetUnreachable(true)
				start := time.Now()
				err = l.Release(context.Background())
				if took := time.Since(start); took != tc.opTimeout {
					t.Fatalf("Release returned after %v, want the op timeout %v", took, tc.opTimeout)
				}
				if !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, lease.ErrNotHeld) {
					t.Fatalf("Release = %v, want an error wrapping os.ErrDeadlineExceeded", err)
				}
				if cause := context.Cause(l.Context()); cause != lease.ErrReleased {
					t.Fatalf("cause %v, want ErrReleased", cause)
				}
				// The delete never arrived: the name expires by its TTL.
				if held, _ := srv.Holder("job"); !held {
					t.Fatal("an unreachable server applied the release")
				}
			})
		})
		t.Run(tc.name+"/lost", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := leasetest.NewServer()
				m := manager(t, srv, append([]lease.Option{lease.WithTTL(3 * time.Second)}, tc.opts...)...)
				l, err := m.Acquire(context.Background(), "job")
				if err != nil {
					t.Fatal(err)
				}
				srv.SetUnreachable(true)
				<-l.Done()
				start := time.Now()
				err = l.Release(context.Background())
				if took := time.Since(start); took != tc.opTimeout {
					t.Fatalf("Release returned after %v, want the op timeout %v", took, tc.opTimeout)
				}
				if !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, lease.ErrLost) {
					t.Fatalf("Release = %v, want ErrNotHeld and ErrLost", err)
				}
			})
		})
	}
}

// A manager of a user's tests logs nowhere by default: losing a lease on
// purpose prints no "tenure: lease lost" warning through slog.Default.
// One given lease.WithLogger logs there, which shows the loss is logged at
// all.
func TestManagersLogNowhereByDefault(t *testing.T) {
	var global, given syncBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&global, nil)))
	synctest.Test(t, func(t *testing.T) {
		srv := leasetest.NewServer()
		quiet := manager(t, srv, lease.WithTTL(3*time.Second))
		loud := manager(t, srv, lease.WithTTL(3*time.Second), lease.WithLogger(slog.New(slog.NewTextHandler(&given, nil))))
		ctx := context.Background()
		for _, m := range []*lease.Manager{quiet, loud} {
			l, err := m.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			srv.Delete("job")
			<-l.Done()
			time.Sleep(2 * time.Second) // past the loss report's one-second window
			synctest.Wait()
		}
	})
	if s := global.String(); s != "" {
		t.Fatalf("a leasetest manager without WithLogger logged to slog.Default:\n%s", s)
	}
	if s := given.String(); !strings.Contains(s, "tenure: lease lost") {
		t.Fatalf("the manager given WithLogger logged %q, want the loss", s)
	}
}

// syncBuffer is a bytes.Buffer safe for the managers' report goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
