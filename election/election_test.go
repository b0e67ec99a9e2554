package election_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

var quiet = slog.New(slog.DiscardHandler)

// candidate is one campaigning Election with its own manager, recording
// when its terms start and end.
type candidate struct {
	id     string
	m      *lease.Manager
	e      *election.Election
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	started []time.Time
	ended   []time.Time // when each leading context was cancelled
	causes  []error
	fences  []int64
	leaders []string // OnNewLeader
}

func newCandidate(t *testing.T, client redis.UniversalClient, name, id string, ttl time.Duration) *candidate {
	t.Helper()
	m, err := lease.New(client, lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e, err := election.New(election.Config{Manager: m, Client: client, Name: name, Identity: id, TTL: ttl, RetryPeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &candidate{id: id, m: m, e: e}
}

func (c *candidate) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan error, 1)
	go func() {
		c.done <- c.e.Run(ctx, election.Callbacks{
			OnStartedLeading: func(ctx context.Context) {
				rec, ok := election.Leading(ctx)
				if !ok || rec.Identity != c.id {
					t.Errorf("%s: Leading(ctx) = %+v, %v", c.id, rec, ok)
				}
				c.mu.Lock()
				c.started = append(c.started, time.Now())
				c.fences = append(c.fences, rec.Fence)
				c.mu.Unlock()
				<-ctx.Done()
				at := time.Now()
				c.mu.Lock()
				c.ended = append(c.ended, at)
				c.causes = append(c.causes, context.Cause(ctx))
				c.mu.Unlock()
			},
			OnNewLeader: func(id string) {
				c.mu.Lock()
				c.leaders = append(c.leaders, id)
				c.mu.Unlock()
			},
		})
	}()
	t.Cleanup(func() { c.stop(t) })
}

// stop cancels Run and waits for it.
func (c *candidate) stop(t *testing.T) error {
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Run did not return", c.id)
		return nil
	}
}

// leaderOf waits until one of cs leads, and returns it.
func leaderOf(t *testing.T, within time.Duration, cs ...*candidate) *candidate {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, c := range cs {
			c.mu.Lock()
			leading := len(c.started) > len(c.ended)
			c.mu.Unlock()
			if leading {
				return c
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", within)
	return nil
}

func TestConfigValidation(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	m, err := lease.New(client, lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ok := election.Config{Manager: m, Client: client, Name: "n", Identity: "a"}
	for _, tc := range []struct {
		what string
		edit func(*election.Config)
	}{
		{"no client, no manager", func(c *election.Config) { c.Client, c.Manager = nil, nil }},
		{"empty name", func(c *election.Config) { c.Name = "" }},
		{"long name", func(c *election.Config) { c.Name = string(make([]byte, lease.MaxNameLen+1)) }},
		{"brace name", func(c *election.Config) { c.Name = "}x" }},
		{"bad identity", func(c *election.Config) { c.Identity = "\xff" }},
		{"brace prefix", func(c *election.Config) { c.KeyPrefix = "a{" }},
		{"prefix not the manager's", func(c *election.Config) { c.KeyPrefix = "other:" }},
		{"short TTL", func(c *election.Config) { c.TTL = time.Millisecond }},
		{"negative retry", func(c *election.Config) { c.RetryPeriod = -1 }},
	} {
		cfg := ok
		tc.edit(&cfg)
		if _, err := election.New(cfg); !errors.Is(err, election.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", tc.what, err)
		}
	}
	// A quorum manager has several clients: which one to read is the
	// caller's to say.
	var nodes []redis.UniversalClient
	for _, port := range []string{"1", "2", "3"} {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
		defer c.Close()
		nodes = append(nodes, c)
	}
	q, err := lease.NewQuorum(nodes, lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := election.New(election.Config{Manager: q, Name: "n", Identity: "a"}); !errors.Is(err, election.ErrInvalidConfig) {
		t.Errorf("a quorum manager and no client: New = %v, want ErrInvalidConfig", err)
	}
	noop := election.Callbacks{OnStartedLeading: func(context.Context) {}}
	for _, tc := range []struct {
		what string
		cfg  election.Config
		cb   election.Callbacks
	}{
		{"no manager", election.Config{Client: client, Name: "n", Identity: "a"}, noop},
		{"no OnStartedLeading", ok, election.Callbacks{}},
	} {
		e, err := election.New(tc.cfg)
		if err != nil {
			t.Fatalf("%s: New: %v", tc.what, err)
		}
		if err := e.Run(context.Background(), tc.cb); !errors.Is(err, election.ErrInvalidConfig) {
			t.Errorf("%s: Run = %v, want ErrInvalidConfig", tc.what, err)
		}
	}
}

// A Config with a Manager alone reads the leader record through the
// client the Manager was made with, and campaigns with a lease's default
// TTL, as the tenure command does.
func TestManagerAloneAndDefaultTTL(t *testing.T) {
	srv := redistest.Start(t)
	m, err := lease.New(srv.Client(t), lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := election.New(election.Config{Manager: m, Name: "solo", Identity: "only"})
	if err != nil {
		t.Fatalf("New with a Manager and no Client: %v", err)
	}
	var (
		rec  election.Record
		rerr error
		left time.Duration
	)
	err = e.Run(context.Background(), election.Callbacks{OnStartedLeading: func(ctx context.Context) {
		rec, rerr = e.Leader(ctx)
		if l, ok := lease.FromContext(ctx); ok {
			left = time.Until(l.Deadline())
		}
		_ = e.Resign(ctx)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rerr != nil || rec.Identity != "only" {
		t.Fatalf("Leader read through the Manager's client: %+v, %v", rec, rerr)
	}
	// The deadline is the TTL less the drift margin from the acquire's
	// send: well above 15s for 30s, and below 30s.
	if left <= 20*time.Second || left > lease.DefaultTTL {
		t.Fatalf("the leadership lease has %v left, want a TTL of lease.DefaultTTL (%v)", left, lease.DefaultTTL)
	}
}

// TestResignHandsOver: one of three candidates leads, the record names it
// with its fence, and each resignation hands leadership on within a few
// round trips; an observer sees every term and, at the end, no leader.
func TestResignHandsOver(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	const name = "scheduler"
	cs := []*candidate{
		newCandidate(t, client, name, "a", 10*time.Second),
		newCandidate(t, client, name, "b", 10*time.Second),
		newCandidate(t, client, name, "c", 10*time.Second),
	}
	watcher, err := election.New(election.Config{Client: client, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	octx, ostop := context.WithCancel(context.Background())
	defer ostop()
	observed := watcher.Observe(octx)
	if rec := <-observed; rec != (election.Record{}) {
		t.Fatalf("first observation %+v, want no leader", rec)
	}
	if _, err := watcher.Leader(octx); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v", err)
	}
	for _, c := range cs {
		c.run(t)
	}
	var seen []election.Record
	var lastFence int64
	var last *candidate
	remaining := cs
	for len(remaining) > 0 {
		l := leaderOf(t, 5*time.Second, remaining...)
		last = l
		rec, err := watcher.Leader(octx)
		if err != nil || rec.Identity != l.id {
			t.Fatalf("Leader = %+v, %v; want %s", rec, err, l.id)
		}
		if rec.Fence <= lastFence {
			t.Fatalf("fence %d after %d", rec.Fence, lastFence)
		}
		lastFence = rec.Fence
		// The observer reports the term.
		for rec := range observed {
			if rec.Fence == lastFence {
				seen = append(seen, rec)
				break
			}
		}
		others := remaining[:0:0]
		for _, c := range remaining {
			if c != l {
				others = append(others, c)
			}
		}
		start := time.Now()
		if err := l.e.Resign(context.Background()); err != nil {
			t.Fatalf("Resign: %v", err)
		}
		if err := <-l.done; err != nil {
			t.Fatalf("%s: Run after Resign = %v, want nil", l.id, err)
		}
		l.cancel = nil
		l.mu.Lock()
		if cause := l.causes[len(l.causes)-1]; !errors.Is(cause, election.ErrResigned) {
			t.Errorf("%s: leading context's cause %v, want ErrResigned", l.id, cause)
		}
		l.mu.Unlock()
		if len(others) > 0 {
			next := leaderOf(t, 5*time.Second, others...)
			// leaderOf bounds the wait; how fast the handover is is
			// logged, not asserted: a loaded machine may be slow.
			t.Logf("%s resigned, %s leads %v later", l.id, next.id, time.Since(start))
		}
		remaining = others
	}
	// The last resignation leaves no leader, and the observer says so.
	for rec := range observed {
		if rec == (election.Record{}) {
			break
		}
	}
	if len(seen) != 3 {
		t.Errorf("observer saw %d terms, want 3: %+v", len(seen), seen)
	}
	if n, _ := client.Exists(octx, "tenure:{scheduler}:leader").Result(); n != 0 {
		t.Error("the leader record is left after the last resignation")
	}
	// The last to lead ran through the earlier terms and heard of them.
	// (The first leader may resign before its own observer has read
	// anything: its Run, and the observer with it, ends at the
	// resignation.)
	last.mu.Lock()
	if len(last.leaders) == 0 {
		t.Errorf("OnNewLeader was never called on %s, which ran through two terms before its own", last.id)
	}
	last.mu.Unlock()
}

// TestCloseHandsOver: a leader whose manager is closed (its process ends
// without resigning) is replaced promptly, since Close releases the lease.
func TestCloseHandsOver(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	a := newCandidate(t, client, "job", "a", 10*time.Second)
	a.run(t)
	leaderOf(t, 5*time.Second, a)
	b := newCandidate(t, client, "job", "b", 10*time.Second)
	b.run(t)
	time.Sleep(50 * time.Millisecond) // b waits
	start := time.Now()
	if err := a.m.Close(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, 5*time.Second, b)
	t.Logf("takeover after Close took %v", time.Since(start))
	if err := a.stop(t); !errors.Is(err, lease.ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
	a.mu.Lock()
	if !errors.Is(a.causes[0], lease.ErrClosed) {
		t.Errorf("cause %v, want ErrClosed", a.causes[0])
	}
	a.mu.Unlock()
	rec, err := b.e.Leader(context.Background())
	if err != nil || rec.Identity != "b" {
		t.Errorf("Leader = %+v, %v", rec, err)
	}
}

// TestLostTermReleaseWaitsNoLongerThanItsDeadline: a leader cut off from
// Redis (a black hole) on a client that heeds only deadlines
// (ContextTimeoutEnabled) has OnStoppedLeading called soon after its
// leading context ends with ErrLost, not after ReleaseTimeout (30s here):
// the release of a lost lease is a courtesy, bounded by its deadline.
func TestLostTermReleaseWaitsNoLongerThanItsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	opts := srv.Options()
	opts.Addr, opts.MaxRetries, opts.ContextTimeoutEnabled = proxy.Addr(), -1, true
	// Only the contexts bound the round trips (a read timeout would end
	// the release's wait at 3s).
	opts.ReadTimeout, opts.WriteTimeout = time.Minute, time.Minute
	cut := redis.NewClient(opts)
	t.Cleanup(func() { cut.Close() })
	m, err := lease.New(cut, lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e, err := election.New(election.Config{Manager: m, Name: "report", Identity: "a",
		TTL: 600 * time.Millisecond, ReleaseTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	started, lost, stopped := make(chan struct{}), make(chan error, 1), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, election.Callbacks{
			OnStartedLeading: func(lctx context.Context) {
				close(started)
				<-lctx.Done()
				lost <- context.Cause(lctx)
			},
			OnStoppedLeading: func() { close(stopped) },
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not lead")
	}
	proxy.BlackHole(true)
	cause := <-lost
	lostAt := time.Now()
	if !errors.Is(cause, lease.ErrLost) {
		t.Errorf("cause %v, want ErrLost", cause)
	}
	select {
	case <-stopped:
		t.Logf("OnStoppedLeading %v after the loss", time.Since(lostAt))
	case <-time.After(10 * time.Second): // ReleaseTimeout is 30s
		t.Error("OnStoppedLeading was not called within 10s of the loss: the release waited past the lease's deadline")
	}
	proxy.BlackHole(false)
	cancel()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("Run did not return")
	}
}

// guardHook reports, once armed, the deadline of every leader record
// script the client is about to send (the record's refresh, once the
// record is written): the one command that names the record's key.
type guardHook struct {
	armed     *atomic.Bool
	deadlines chan time.Time
}

func (h guardHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h guardHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		if h.armed.Load() && (c.Name() == "evalsha" || c.Name() == "eval") && hasKey(c, "tenure:{refresh}:leader") {
			dl, _ := ctx.Deadline()
			select {
			case h.deadlines <- dl:
			default:
			}
		}
		return next(ctx, c)
	}
}

// hasKey reports whether c passes key: as a string, or as the *string a
// backend.Script passes its keys as.
func hasKey(c redis.Cmder, key string) bool {
	for _, a := range c.Args() {
		if s, ok := a.(string); ok && s == key {
			return true
		}
		if s, ok := a.(*string); ok && *s == key {
			return true
		}
	}
	return false
}

func (h guardHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRecordRefreshEndsByTheLeaseDeadline: a leader cut off from Redis
// keeps refreshing its record, and each refresh is given no later than the
// lease's local deadline as it stands when the refresh is sent: a refresh
// still waiting after that, on a client that heeds only deadlines
// (ContextTimeoutEnabled), would hold up the term's end and so
// OnStoppedLeading. With a TTL of 6s a refresh is sent every 2s and given
// min(5s, TTL): the first one after the cut, 2s into the term, would wait
// until 7s, past the deadline of about 6s that the acquisition gave.
func TestRecordRefreshEndsByTheLeaseDeadline(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	opts := srv.Options()
	opts.Addr, opts.MaxRetries, opts.ContextTimeoutEnabled = proxy.Addr(), -1, true
	cut := redis.NewClient(opts)
	t.Cleanup(func() { cut.Close() })
	hook := guardHook{armed: new(atomic.Bool), deadlines: make(chan time.Time, 1)}
	cut.AddHook(hook)
	m, err := lease.New(cut, lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e, err := election.New(election.Config{Manager: m, Name: "refresh", Identity: "a", TTL: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	leases := make(chan *lease.Lease, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, election.Callbacks{OnStartedLeading: func(lctx context.Context) {
			l, _ := lease.FromContext(lctx)
			leases <- l
			<-lctx.Done()
		}})
	}()
	var l *lease.Lease
	select {
	case l = <-leases:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not lead")
	}
	proxy.BlackHole(true) // before the first renewal (2s): the deadline stays the acquisition's
	hook.armed.Store(true)
	select {
	case dl := <-hook.deadlines:
		if leaseDL := l.Deadline(); dl.IsZero() || dl.After(leaseDL) {
			t.Errorf("a record refresh was given until %v, past the lease's local deadline %v", dl.Format(time.StampMilli), leaseDL.Format(time.StampMilli))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no record refresh was sent")
	}
	proxy.BlackHole(false)
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
}

// TestCutOffLeaderStopsFirst: a leader cut off from Redis (a black hole, no
// error ever comes back) stops leading by its lease's local deadline, before
// the other candidate starts, which happens within the TTL.
func TestCutOffLeaderStopsFirst(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	opts := srv.Options()
	opts.Addr = proxy.Addr()
	opts.MaxRetries = -1
	cut := redis.NewClient(opts)
	t.Cleanup(func() { cut.Close() })
	const ttl = 600 * time.Millisecond
	a := newCandidate(t, cut, "cron", "a", ttl)
	a.run(t)
	leaderOf(t, 5*time.Second, a)
	b := newCandidate(t, srv.Client(t), "cron", "b", ttl)
	b.run(t)
	time.Sleep(50 * time.Millisecond)

	proxy.BlackHole(true)
	cutAt := time.Now()
	leaderOf(t, 3*ttl, b)
	b.mu.Lock()
	bStarted := b.started[0]
	b.mu.Unlock()
	a.mu.Lock()
	if len(a.ended) == 0 {
		t.Fatal("a still leads while b does")
	}
	aEnded, cause := a.ended[0], a.causes[0]
	a.mu.Unlock()
	if !aEnded.Before(bStarted) {
		t.Errorf("a stopped leading %v after b started", aEnded.Sub(bStarted))
	}
	if !errors.Is(cause, lease.ErrLost) {
		t.Errorf("a's cause %v, want ErrLost", cause)
	}
	t.Logf("a cut off; a stopped after %v, b started after %v", aEnded.Sub(cutAt), bStarted.Sub(cutAt))
	proxy.BlackHole(false)
	// Run returns promptly even though its connections saw a black hole.
	t0 := time.Now()
	_ = a.stop(t)
	if d := time.Since(t0); d > 10*time.Second { // hung, not slow
		t.Errorf("Run took %v to return after its context ended", d)
	}
}

// S6: an election leaves no key behind once its candidates are gone: not
// when the last leader resigns, and not when a leader's manager is closed
// under it (its record then expires with its lease).
func TestNoKeyOutlivesTheCandidates(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ttl := 500 * time.Millisecond
	ctx := context.Background()

	a := newCandidate(t, client, "resigned", "a", ttl)
	a.run(t)
	leaderOf(t, 5*time.Second, a)
	if err := a.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.m.Close(); err != nil {
		t.Fatal(err)
	}

	b := newCandidate(t, client, "closed", "b", ttl)
	b.run(t)
	leaderOf(t, 5*time.Second, b)
	if err := b.m.Close(); err != nil { // no resignation: the record stays until it expires
		t.Fatal(err)
	}
	if err := b.stop(t); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Run after Close = %v", err)
	}

	redistest.WaitNoKeys(t, client, ttl)
}

// TestIdentityDefaultsToHostPid: a candidate without an Identity is named
// host/pid, as "tenure elect" names its candidates, and leads under it.
// Run refused it ("Run needs an Identity").
func TestIdentityDefaultsToHostPid(t *testing.T) {
	srv := redistest.Start(t)
	m, err := lease.New(srv.Client(t), lease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := election.New(election.Config{Manager: m, Name: "anon"})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf("%s/%d", host, os.Getpid())
	if e.Identity() != want || election.DefaultIdentity() != want {
		t.Errorf("Identity() = %q, DefaultIdentity() = %q, want %q", e.Identity(), election.DefaultIdentity(), want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rec election.Record
	err = e.Run(ctx, election.Callbacks{OnStartedLeading: func(lctx context.Context) {
		rec, _ = election.Leading(lctx)
		cancel()
	}})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if rec.Identity != want {
		t.Errorf("the leader record names %q, want %q", rec.Identity, want)
	}
}
