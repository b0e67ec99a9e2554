package semaphore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
	"github.com/tenure-go/tenure/tests/redistest"
)

// workload runs every path of semaphores and read-write locks on c:
// TryAcquire, Acquire woken by a release, fair waiting, Extend, Exec, Do,
// the read and write locks, and Close's release.
func workload(t *testing.T, c redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := newManager(t, c, lease.WithTTL(2*time.Second))
	p, locks := semaphore.New(m), rwlock.New(m)

	a, err := p.TryAcquire(ctx, "acl-s", 1)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := a.Extend(ctx, 3*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if _, err := a.Exec(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, "tenure:{acl-s}:data", a.Fence(), time.Minute)
		return nil
	}); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	for _, fair := range []bool{false, true} {
		got := make(chan error, 1)
		go func() {
			l, err := p.Acquire(ctx, "acl-s", 1, lease.WithFair(fair))
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond)
		if err := a.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiting (fair %v): %v", fair, err)
		}
		if a, err = p.TryAcquire(ctx, "acl-s", 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Do(ctx, "acl-do", 2, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do: %v", err)
	}
	r, err := locks.RLock(ctx, "acl-rw")
	if err != nil {
		t.Fatalf("RLock: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := locks.Lock(ctx, "acl-rw")
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := m.Close(); err != nil { // releases a
		t.Fatalf("Close: %v", err)
	}
}

// Every semaphore and read-write lock path works as a user with
// docs/security.md's rule, no script touches a key it was not given, and
// no key outside the prefix is written.
func TestACLUser(t *testing.T) {
	s := redistest.Start(t)
	c := s.UserClient(t, lease.DefaultKeyPrefix)
	mon := s.Monitor(t)
	workload(t, c)
	s.CheckUserRun(t, mon, lease.DefaultKeyPrefix)
}

// The same in a database above 0: go-redis SELECTs it on every connection,
// which the rule must allow (redis://host/2 in the CLI).
func TestACLUserDatabaseAboveZero(t *testing.T) {
	s := redistest.Start(t)
	opts := s.UserOptions(s.CreateUser(t, "tenure", lease.DefaultKeyPrefix))
	opts.DB = 2
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	mon := s.Monitor(t)
	workload(t, c)
	s.CheckUserRun(t, mon, lease.DefaultKeyPrefix)
	admin := redis.NewClient(&redis.Options{Addr: s.Addr(), DB: 2})
	defer admin.Close()
	if n := admin.Exists(context.Background(), "tenure:{acl-s}:data").Val(); n != 1 {
		t.Fatal("the workload's data is not in database 2")
	}
}

// On Redis Cluster, semaphores spread over the primaries work as on one
// server: every key of a name is in the name's slot.
func TestCluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	workload(t, cl.Client(t))
	p := semaphore.New(newManager(t, cl.Client(t)))
	ctx := context.Background()
	names := []string{"a", "b", "c", "d", "e", "f"}
	counts := map[string]*live{}
	for _, n := range names {
		counts[n] = &live{t: t, n: 2}
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 8 {
				name := names[(w+i)%len(names)]
				l, err := p.Acquire(ctx, name, 2)
				if err != nil {
					t.Error(err)
					return
				}
				end := counts[name].hold(l)
				time.Sleep(time.Millisecond)
				end()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// Whatever the scheduling did above, two permits of a name are held
	// at once here, and a third is refused.
	var two []*lease.Lease
	for range 2 {
		l, err := p.TryAcquire(ctx, "a", 2)
		if err != nil {
			t.Fatal(err)
		}
		two = append(two, l)
	}
	if _, err := p.TryAcquire(ctx, "a", 2); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a third permit of 2 on a Cluster: %v", err)
	}
	for _, l := range two {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.TryAcquire(ctx, "", 2); !errors.Is(err, lease.ErrInvalidName) {
		t.Fatal(err)
	}
}

// On a Cluster, the rule plus what docs/security.md adds for a Cluster
// client (+cluster|slots +command +asking) is enough: leases, permits and
// read-write locks run as that user on every primary, refused nothing.
// Without the additions the first acquire is refused CLUSTER SLOTS.
func TestACLUserOnCluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	const password = "cluster-pw"
	rules := []string{"tenure", "on", ">" + password, "~tenure:*", "&tenure:*", "-@all"}
	for _, c := range append(append([]string{}, redistest.ACLCommands...), "cluster|slots", "command", "asking") {
		rules = append(rules, "+"+c)
	}
	for _, c := range cl.Nodes()[0].IdentityCommands(t) {
		rules = append(rules, "+"+c)
	}
	for _, s := range cl.Nodes() {
		s.SetUser(t, rules...)
	}
	opts := cl.ClusterOptions()
	opts.Username, opts.Password = "tenure", password
	c := redis.NewClusterClient(opts)
	defer c.Close()
	workload(t, c)
	m := newManager(t, c)
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		l, err := m.TryAcquire(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range cl.Nodes() {
		if log := s.ACLLog(t); len(log) != 0 {
			t.Errorf("%s refused: %q", s.Addr(), log)
		}
	}
}

// Through Sentinel, the data servers need nothing beyond the rule: the
// Failover client asks the Sentinels (which have no users here) where the
// primary is, and sends the data servers only tenure's commands.
func TestACLUserThroughSentinel(t *testing.T) {
	s := redistest.NewSentinel(t, 1, 3)
	const password = "sentinel-pw"
	rules := []string{"tenure", "on", ">" + password, "~tenure:*", "&tenure:*", "-@all"}
	for _, c := range append(append([]string{}, redistest.ACLCommands...), s.Servers()[0].IdentityCommands(t)...) {
		rules = append(rules, "+"+c)
	}
	for _, srv := range s.Servers() {
		srv.SetUser(t, rules...)
	}
	opts := s.FailoverOptions()
	opts.Username, opts.Password = "tenure", password
	c := redis.NewFailoverClient(opts)
	defer c.Close()
	workload(t, c)
	for _, srv := range s.Servers() {
		if log := srv.ACLLog(t); len(log) != 0 {
			t.Errorf("%s refused: %q", srv.Addr(), log)
		}
	}
}
