package lease_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Bad input from the Redis side: a server that is down, that answers with
// errors, or that holds keys of another kind under a lease's name. Each must
// give a clear error, never a panic or a hang, and leave no goroutine behind.

// leakCheck returns a function that closes what the test opened (managers
// first, then clients) and fails the test if any goroutine started since
// leakCheck was called is still running. Servers must be started before.
func leakCheck(t *testing.T) func(ms []*lease.Manager, cs ...*redis.Client) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	return func(ms []*lease.Manager, cs ...*redis.Client) {
		t.Helper()
		for _, m := range ms {
			if err := m.Close(); err != nil {
				t.Logf("Close: %v", err)
			}
		}
		for _, c := range cs {
			_ = c.Close()
		}
		// go-redis retries a failed dial from a goroutine that sleeps a
		// second between attempts and sees the closed client only then.
		var err error
		for range 30 {
			if err = goleak.Find(ignore); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("goroutines left behind: %v", err)
	}
}

// within fails the test if f takes longer than d, which would be a hang.
func within[T any](t *testing.T, what string, d time.Duration, f func() T) T {
	t.Helper()
	start := time.Now()
	v := f()
	took := time.Since(start)
	t.Logf("%s took %v", what, took)
	if took > d {
		t.Errorf("%s took %v, more than %v", what, took, d)
	}
	return v
}

func TestRedisDownAtNew(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	srv.MustKill(t) // nothing listens there now
	done := leakCheck(t)

	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: time.Second, MaxRetries: -1})
	m, err := lease.New(c, lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatalf("New with Redis down = %v: New makes no round trip", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for what, f := range map[string]func() error{
		"TryAcquire": func() error { _, err := m.TryAcquire(ctx, "job"); return err },
		"Acquire":    func() error { _, err := m.Acquire(ctx, "job"); return err },
		"Do": func() error {
			return m.Do(ctx, "job", func(context.Context) error { t.Error("Do ran fn with Redis down"); return nil })
		},
	} {
		err := within(t, what, 5*time.Second, f)
		if err == nil || errors.Is(err, lease.ErrNotAcquired) {
			t.Errorf("%s with Redis down = %v, want the connection error", what, err)
		} else if !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), `"job"`) {
			t.Errorf("%s with Redis down: unclear error %q", what, err)
		}
	}
	within(t, "Close", 5*time.Second, func() error { done([]*lease.Manager{m}, c); return nil })
	if err := m.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// A manager that started with Redis down works once it is up.
func TestRedisComesUpAfterNew(t *testing.T) {
	srv := redistest.Start(t)
	srv.MustKill(t)
	c := srv.Client(t)
	m := newManager(t, c, lease.WithOpTimeout(time.Second))
	ctx := context.Background()
	if _, err := m.TryAcquire(ctx, "job"); err == nil {
		t.Fatal("acquired with Redis down")
	}
	srv.MustRestart(t)
	l, err := m.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatalf("after Redis came up: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// NOSCRIPT after SCRIPT FLUSH is recovered from by every operation: the
// acquire, the watchdog's pipelined renewal, Extend and Release.
func TestNoScriptRecovers(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	done := leakCheck(t)
	c := srv.NewClient()
	m, err := lease.New(c, lease.WithLogger(quiet), lease.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	flush := func() {
		t.Helper()
		if err := raw.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l1, err := m.TryAcquire(ctx, "one") // loads the scripts
	if err != nil {
		t.Fatal(err)
	}
	flush()
	l2, err := m.TryAcquire(ctx, "two")
	if err != nil {
		t.Fatalf("acquire after SCRIPT FLUSH: %v", err)
	}
	flush()
	time.Sleep(500 * time.Millisecond) // renewals
	if l1.Err() != nil || l2.Err() != nil {
		t.Fatalf("lost after SCRIPT FLUSH: %v, %v", l1.Err(), l2.Err())
	}
	flush()
	if err := l1.Extend(ctx, time.Second); err != nil {
		t.Fatalf("Extend after SCRIPT FLUSH: %v", err)
	}
	flush()
	for _, l := range []*lease.Lease{l1, l2} {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release after SCRIPT FLUSH: %v", err)
		}
	}
	if n := raw.Exists(ctx, "tenure:{one}", "tenure:{two}").Val(); n != 0 {
		t.Fatalf("%d keys left after release", n)
	}
	done([]*lease.Manager{m}, c)
}

// replicaOf makes replica a read-only replica of primary and waits until it
// has synchronised.
func replicaOf(t *testing.T, replica *redis.Client, primary *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	if err := replica.Do(ctx, "REPLICAOF", "127.0.0.1", primary.Port()).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(replica.Info(ctx, "replication").Val(), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not sync")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReadOnlyReplica(t *testing.T) {
	primary := redistest.Start(t)
	replica := redistest.Start(t)
	replicaOf(t, replica.Client(t), primary)
	done := leakCheck(t)
	c := replica.NewClient()
	m, err := lease.New(c, lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for what, f := range map[string]func() error{
		"TryAcquire": func() error { _, err := m.TryAcquire(ctx, "job"); return err },
		"Acquire":    func() error { _, err := m.Acquire(ctx, "job"); return err },
	} {
		err := within(t, what, 5*time.Second, f)
		if err == nil || errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), "READONLY") {
			t.Errorf("%s on a read-only replica = %v, want the READONLY error", what, err)
		}
	}
	if n := primary.Client(t).DBSize(ctx).Val(); n != 0 {
		t.Errorf("%d keys on the primary", n)
	}
	done([]*lease.Manager{m}, c)
}

// A server demoted to a replica while a lease is held (a failover the
// client did not follow): the lease is lost, by its deadline at the latest,
// and Release answers with an error, not a panic.
func TestHeldLeaseOnDemotedServer(t *testing.T) {
	other := redistest.Start(t)
	srv := redistest.Start(t)
	raw := srv.Client(t)
	done := leakCheck(t)
	c := srv.NewClient()
	ttl := 600 * time.Millisecond
	m, err := lease.New(c, lease.WithLogger(quiet), lease.WithTTL(ttl), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := m.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	replicaOf(t, raw, other) // the sync replaces the data set with the empty one
	waitDone(t, l, ttl+allowance)
	if l.Err() != lease.ErrLost {
		t.Fatalf("Err = %v, want ErrLost", l.Err())
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release = %v", err)
	}
	done([]*lease.Manager{m}, c)
}

func TestOutOfMemory(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	done := leakCheck(t)
	c := srv.NewClient()
	ttl := 600 * time.Millisecond
	m, err := lease.New(c, lease.WithLogger(quiet), lease.WithTTL(ttl), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := m.TryAcquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	fence := raw.Get(ctx, "tenure:{job}:fence").Val()
	if err := raw.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	for what, f := range map[string]func() error{
		"TryAcquire": func() error { _, err := m.TryAcquire(ctx, "job"); return err },
		"Acquire":    func() error { _, err := m.Acquire(ctx, "job"); return err },
		"Do": func() error {
			return m.Do(ctx, "job", func(context.Context) error { t.Error("Do ran fn out of memory"); return nil })
		},
	} {
		err := within(t, what, 5*time.Second, f)
		if err == nil || errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), "OOM") {
			t.Errorf("%s out of memory = %v, want the OOM error", what, err)
		}
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 || raw.Get(ctx, "tenure:{job}:fence").Val() != fence {
		t.Error("a failed acquire left a trace")
	}
	// Renewal only shortens nothing and allocates nothing: the held lease
	// lives on, and Release frees it.
	time.Sleep(ttl + ttl/2)
	if held.Err() != nil {
		t.Errorf("the held lease was lost out of memory: %v", held.Err())
	}
	if err := held.Release(ctx); err != nil {
		t.Errorf("Release out of memory = %v", err)
	}
	if err := raw.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	l, err := m.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatalf("after memory was freed: %v", err)
	}
	_ = l.Release(ctx)
	done([]*lease.Manager{m}, c)
}

// A name whose key holds another type (created by someone else) is held:
// TryAcquire says ErrNotAcquired, and neither renewal nor Release ever
// deletes the foreign key.
func TestForeignKeyTypes(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	done := leakCheck(t)
	c := srv.NewClient()
	ttl := 300 * time.Millisecond
	m, err := lease.New(c, lease.WithLogger(quiet), lease.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "tenure:{job}"
	foreign := map[string]func() error{
		"list":   func() error { return raw.RPush(ctx, key, "a", "b").Err() },
		"hash":   func() error { return raw.HSet(ctx, key, "owner", "someone").Err() },
		"set":    func() error { return raw.SAdd(ctx, key, "x").Err() },
		"zset":   func() error { return raw.ZAdd(ctx, key, redis.Z{Score: 1, Member: "x"}).Err() },
		"stream": func() error { return raw.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"k", "v"}}).Err() },
		"string": func() error { return raw.Set(ctx, key, "not a token", 0).Err() },
	}
	for kind, create := range foreign {
		raw.Del(ctx, key)
		if err := create(); err != nil {
			t.Fatal(err)
		}
		want := raw.Type(ctx, key).Val()
		if _, err := m.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Errorf("TryAcquire over a %s = %v, want ErrNotAcquired", kind, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := m.Acquire(wctx, "job")
		cancel()
		if !errors.Is(err, lease.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire over a %s = %v, want a wait that ends with the context", kind, err)
		}
		// A lease whose key someone replaces with a foreign one: renewal
		// finds it taken over, Release finds it not held, and the foreign
		// key stays.
		raw.Del(ctx, key)
		l, err := m.TryAcquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		raw.Del(ctx, key)
		if err := create(); err != nil {
			t.Fatal(err)
		}
		waitDone(t, l, ttl/3+allowance+50*time.Millisecond)
		if l.Err() != lease.ErrLost {
			t.Errorf("%s: Err = %v, want ErrLost", kind, l.Err())
		}
		if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s: Release = %v, want ErrNotHeld", kind, err)
		}
		l2, err := m.TryAcquire(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Rename(ctx, key, "tenure:{other}").Err(); err != nil { // overwrite a live lease's key
			t.Fatal(err)
		}
		if err := l2.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s: Release of a lease overwritten = %v, want ErrNotHeld", kind, err)
		}
		if got := raw.Type(ctx, "tenure:{other}").Val(); got != want {
			t.Errorf("%s: the foreign key became %q", kind, got)
		}
		raw.Del(ctx, key, "tenure:{other}")
	}
	done([]*lease.Manager{m}, c)
}

// A fencing counter someone broke (another type, not a number, at the
// limit) makes the acquire fail with the server's error and leaves no lease
// behind.
func TestBrokenFenceCounter(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	done := leakCheck(t)
	c := srv.NewClient()
	m, err := lease.New(c, lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fence := "tenure:{job}:fence"
	for what, c := range map[string]struct {
		set  func() error
		want string
		left string // the counter's type and value once the acquire failed
	}{
		"a list":     {func() error { return raw.RPush(ctx, fence, "x").Err() }, "WRONGTYPE", "list [x]"},
		"not number": {func() error { return raw.Set(ctx, fence, "abc", 0).Err() }, "not an integer", "string abc"},
		"at the max": {func() error { return raw.Set(ctx, fence, "9223372036854775807", 0).Err() }, "overflow", "string 9223372036854775807"},
	} {
		raw.Del(ctx, fence)
		if err := c.set(); err != nil {
			t.Fatal(err)
		}
		_, err := m.TryAcquire(ctx, "job")
		if err == nil || errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("fence counter %s: TryAcquire = %v, want an error with %q", what, err, c.want)
		}
		if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
			t.Errorf("fence counter %s: a lease was left behind", what)
		}
		// The counter is left as it was: the acquire wrote nothing.
		var left string
		switch typ := raw.Type(ctx, fence).Val(); typ {
		case "list":
			left = fmt.Sprint("list ", raw.LRange(ctx, fence, 0, -1).Val())
		default:
			left = typ + " " + raw.Get(ctx, fence).Val()
		}
		if left != c.left {
			t.Errorf("fence counter %s: left as %q, want %q", what, left, c.left)
		}
	}
	raw.Del(ctx, fence)
	if _, err := m.TryAcquire(ctx, "job"); err != nil {
		t.Fatalf("after the counter was removed: %v", err)
	}
	done([]*lease.Manager{m}, c)
}

// flakyConn is a connection to a real server that, when armed, lets the
// next request through and then loses its reply, as a connection reset
// right after the server executed the command would.
type flakyConn struct {
	net.Conn
	armed *atomic.Bool
	lose  atomic.Bool
}

func (c *flakyConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if bytes.Contains(b, []byte("evalsha")) && c.armed.CompareAndSwap(true, false) {
		c.lose.Store(true)
	}
	return n, err
}

func (c *flakyConn) Read(b []byte) (int, error) {
	if c.lose.Load() {
		time.Sleep(50 * time.Millisecond) // the server executes the request
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// A Release whose reply is lost to a connection reset is resent by
// go-redis's retries (on by default). Without state on the server the copy
// would find the first one's deletion and answer "not held" (and now "lost")
// for a lease held until it released it; release.lua remembers the release
// under P{N}:retired:<op>, so the copy gets the first answer. Found by the
// chaos runs.
func TestReleaseRetriedAfterLostReply(t *testing.T) {
	if err := releaseAfterLostReply(t); err != nil {
		t.Fatalf("Release of a held lease, retried after a lost reply, says %v", err)
	}
}

// lease.WithReleaseMemory(0) gives that answer up, as its doc says: the copy
// finds the name gone, and Release says ErrNotHeld and ErrLost, though the
// first copy released the lease.
func TestReleaseMemoryZeroGivesUpTheResentAnswer(t *testing.T) {
	err := releaseAfterLostReply(t, lease.WithReleaseMemory(0))
	if !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release retried after a lost reply, with no release memory, says %v; want ErrNotHeld and ErrLost", err)
	}
}

// releaseAfterLostReply releases a lease of a manager built with opts, the
// release's reply lost to a connection reset, and returns what Release said.
func releaseAfterLostReply(t *testing.T, opts ...lease.Option) error {
	t.Helper()
	srv := redistest.Start(t)
	var armed atomic.Bool
	c := redis.NewClient(&redis.Options{
		Addr:                  srv.Addr(),
		ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &flakyConn{Conn: conn, armed: &armed}, nil
		},
	})
	t.Cleanup(func() { _ = c.Close() })
	m := newManager(t, c, opts...)
	ctx := context.Background()
	for range 2 { // the second time, the scripts are cached: EVALSHA runs them
		l, err := m.TryAcquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l, err := m.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	err = l.Release(ctx)
	if armed.Load() {
		t.Fatal("the release's reply was not lost: the test proved nothing")
	}
	if srv.Client(t).Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("the release was not applied: the test proved nothing")
	}
	return err
}

// A nil *Lease, what a failed Acquire returns, never panics: "defer
// l.Release(ctx)" before the error check is a common slip.
func TestNilLeaseNeverPanics(t *testing.T) {
	var l *lease.Lease
	ctx := context.Background()
	if l.Name() != "" || l.Token() != "" || l.Fence() != 0 || !l.Deadline().IsZero() {
		t.Fatal("a nil lease has a name, token, fence or deadline")
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("a nil lease's context is not done")
	}
	if !errors.Is(context.Cause(l.Context()), lease.ErrNotHeld) {
		t.Fatalf("cause %v", context.Cause(l.Context()))
	}
	if err := l.Err(); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Err = %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release = %v", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Extend = %v", err)
	}
	if _, err := l.Exec(ctx, func(redis.Pipeliner) error { return nil }); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Exec = %v", err)
	}
	if got, ok := lease.FromContext(l.Context()); ok && got != nil {
		t.Fatal("a nil lease's context carries a lease")
	}
}

// Acquire's error when its context ends matches ErrNotAcquired and the
// context's error, and the cause of a context that has one; it says the
// name was held only when an attempt found it held.
func TestAcquireErrorWhenTheWaitEnds(t *testing.T) {
	srv := redistest.Start(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	if _, err := m.Acquire(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	errWaited := errors.New("waited long enough")
	for _, tc := range []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		want  []error
		fair  bool
		held  bool
		lease string
	}{
		{"timeout", func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 50*time.Millisecond) },
			[]error{context.DeadlineExceeded}, false, true, "held"},
		{"timeout with a cause", func() (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(ctx, 50*time.Millisecond, errWaited)
		}, []error{context.DeadlineExceeded, errWaited}, false, true, "held"},
		{"fair, timeout with a cause", func() (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(ctx, 50*time.Millisecond, errWaited)
		}, []error{context.DeadlineExceeded, errWaited}, true, true, "held"},
		{"cancelled before any attempt", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancelCause(ctx)
			cancel(errWaited)
			return c, func() {}
		}, []error{context.Canceled, errWaited}, false, false, "free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cancel := tc.ctx()
			defer cancel()
			_, err := m.Acquire(c, tc.lease, lease.WithFair(tc.fair))
			for _, want := range append(tc.want, lease.ErrNotAcquired) {
				if !errors.Is(err, want) {
					t.Errorf("error %q does not match %v", err, want)
				}
			}
			if says := strings.Contains(err.Error(), "held"); says != tc.held {
				t.Errorf("error %q: says the name was held: %v, want %v", err, says, tc.held)
			}
		})
	}
	if _, err := m.TryAcquire(ctx, "held"); !errors.Is(err, lease.ErrNotAcquired) || !strings.Contains(err.Error(), "held") {
		t.Fatalf("TryAcquire of a held name = %v", err)
	}
}

// countingHook counts the commands a client sends.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func TestBadInputFailsBeforeAnyRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	hook := &countingHook{}
	c.AddHook(hook)

	badOptions := map[string][]lease.Option{
		"zero TTL":               {lease.WithTTL(0)},
		"negative TTL":           {lease.WithTTL(-time.Second)},
		"TTL below 10ms":         {lease.WithTTL(9 * time.Millisecond)},
		"interval at half TTL":   {lease.WithTTL(time.Second), lease.WithRenewInterval(500 * time.Millisecond)},
		"interval above TTL":     {lease.WithTTL(time.Second), lease.WithRenewInterval(2 * time.Second)},
		"zero interval":          {lease.WithRenewInterval(0)},
		"negative drift":         {lease.WithDrift(0.01, -time.Millisecond)},
		"drift factor 1":         {lease.WithDrift(1, 0)},
		"drift factor NaN":       {lease.WithDrift(nanFloat(), 0)},
		"drift eats the renewal": {lease.WithTTL(time.Second), lease.WithDrift(0.5, 200*time.Millisecond)},
		"prefix with brace":      {lease.WithKeyPrefix("a{b")},
		"nil logger":             {lease.WithLogger(nil)},
		"nil backoff":            {lease.WithBackOff(nil)},
		"nil option":             {nil},
		"zero op timeout":        {lease.WithOpTimeout(0)},
	}
	for name, opts := range badOptions {
		if _, err := lease.New(c, opts...); !errors.Is(err, lease.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := lease.New(nil); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
	var nilClient *redis.Client
	if _, err := lease.New(nilClient); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("typed nil client: %v", err)
	}

	m := newManager(t, c)
	ctx := context.Background()
	badNames := map[string]string{
		"empty":    "",
		"too long": strings.Repeat("x", lease.MaxNameLen+1),
		"not UTF8": "bad\xff",
		"brace":    "}job",
	}
	for what, name := range badNames {
		if _, err := m.Acquire(ctx, name); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("Acquire(%s) = %v", what, err)
		}
		if _, err := m.TryAcquire(ctx, name); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("TryAcquire(%s) = %v", what, err)
		}
		if err := m.Do(ctx, name, func(context.Context) error { return nil }); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("Do(%s) = %v", what, err)
		}
	}
	if _, err := m.Acquire(ctx, "ok", lease.WithTTL(time.Millisecond)); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("Acquire with 1ms TTL = %v", err)
	}
	if _, err := m.Acquire(ctx, "ok", lease.WithTTL(time.Second), lease.WithRenewInterval(time.Second)); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("Acquire with interval = TTL: %v", err)
	}
	if err := m.Do(ctx, "ok", nil); !errors.Is(err, lease.ErrInvalidOption) {
		t.Errorf("Do(nil fn) = %v", err)
	}
	if n := hook.n.Load(); n != 0 {
		t.Fatalf("bad input sent %d commands to Redis", n)
	}
	if _, err := m.Acquire(ctx, strings.Repeat("x", lease.MaxNameLen)); err != nil {
		t.Fatalf("a name of exactly MaxNameLen bytes: %v", err)
	}
	if hook.n.Load() == 0 {
		t.Fatal("the hook counts nothing: the test proved nothing")
	}
}

func nanFloat() float64 {
	zero := 0.0
	return zero / zero
}
