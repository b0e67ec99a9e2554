package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// aclNames are the names leaseWorkload uses.
var aclNames = []string{"acl-a", "acl-do", "acl-w", "acl-f", "acl-f2", "acl-ab"}

// eventuallyTrue polls cond until it holds, failing after a generous bound.
func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaseWorkload runs every lease feature on c: TryAcquire, Extend, Exec,
// Release, Do, waiting woken by pub/sub, fair waiting, a fair waiter that
// gives up (leave.lua), and taking back an acquire (abandon.lua). admin
// reads the server to make sure each path really ran.
func leaseWorkload(t *testing.T, c redis.UniversalClient, admin *redis.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := newManager(t, c, lease.WithTTL(2*time.Second))
	other := newManager(t, c, lease.WithTTL(2*time.Second))

	l, err := m.TryAcquire(ctx, "acl-a")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := l.Extend(ctx, 3*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if _, err := l.Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tenure:{acl-a}:data", l.Fence(), time.Minute)
		return nil
	}); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := m.Do(ctx, "acl-do", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do: %v", err)
	}

	// Waiting: the waiter subscribes to the release channel, and the
	// release wakes it.
	for _, fair := range []bool{false, true} {
		name := map[bool]string{false: "acl-w", true: "acl-f"}[fair]
		h, err := m.TryAcquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			w, err := other.Acquire(ctx, name, lease.WithFair(fair))
			if err == nil {
				err = w.Release(ctx)
			}
			got <- err
		}()
		channel := "tenure:{" + name + "}:released"
		eventuallyTrue(t, "the waiter subscribed", func() bool {
			n, _ := admin.PubSubNumSub(ctx, channel).Result()
			return n[channel] == 1
		})
		if fair {
			eventuallyTrue(t, "the fair waiter queued", func() bool {
				return admin.ZCard(ctx, "tenure:{acl-f}:queue").Val() == 1
			})
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter (fair %v): %v", fair, err)
		}
	}

	// A fair waiter that gives up leaves the queue (leave.lua).
	h, err := m.TryAcquire(ctx, "acl-f2")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := other.Acquire(wctx, "acl-f2", lease.WithFair(true)); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a fair waiter giving up: %v", err)
	}
	wcancel()
	eventuallyTrue(t, "the waiter left the queue", func() bool {
		return admin.ZCard(ctx, "tenure:{acl-f2}:queue").Val() == 0
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Taking back an acquire whose reply was lost (abandon.lua), as the
	// manager does after a timeout.
	be := backend.NewRedis(c, lease.DefaultKeyPrefix)
	req := backend.Request{Name: "acl-ab", Token: "0123456789abcdef0123456789abcdef", TTL: time.Second}
	if _, err := be.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := be.Abandon(ctx, req); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	if n := admin.Exists(ctx, "tenure:{acl-ab}").Val(); n != 0 {
		t.Fatal("abandon left the lease")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
}

// Every lease feature works as a user with docs/security.md's rule.
func TestACLUserEveryFeature(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	admin := s.Client(t)
	c := s.UserClient(t, lease.DefaultKeyPrefix)
	mon := s.Monitor(t)
	leaseWorkload(t, c, admin)
	s.CheckUserRun(t, mon, lease.DefaultKeyPrefix)
}

// narrowRules are an ACL user's rules that allow tenure's commands on the
// keys and channels of names alone: a script touching a key of another
// name, or outside the prefix, is refused.
func narrowRules(s *redistest.Server, t *testing.T, user, password string, names []string) []string {
	rules := []string{user, "on", ">" + password, "-@all"}
	for _, c := range append(append([]string{}, redistest.ACLCommands...), s.IdentityCommands(t)...) {
		rules = append(rules, "+"+c)
	}
	for _, n := range names {
		base := lease.DefaultKeyPrefix + "{" + n + "}"
		rules = append(rules, "~"+base, "~"+base+":*", "&"+base+":*")
	}
	return rules
}

// Scripts touch only the keys they are given, and those are the keys of
// their name: every lease feature runs as a user allowed only the keys
// and channels of the names used, MONITOR shows that no script's command
// touched a key outside its KEYS, and no key outside the prefix exists.
func TestScriptsTouchOnlyTheirKeys(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	admin := s.Client(t)
	s.SetUser(t, narrowRules(s, t, "narrow", "pw", aclNames)...)
	o := s.Options()
	o.Username, o.Password = "narrow", "pw"
	c := redis.NewClient(o)
	defer c.Close()
	mon := s.Monitor(t)
	leaseWorkload(t, c, admin)
	s.CheckUserRun(t, mon, lease.DefaultKeyPrefix)
}

// Replica acknowledgement (WAIT) and quorum mode (raise.lua) work as a
// user with docs/security.md's rule.
func TestACLUserReplicasAndQuorum(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	primary, replica := redistest.Start(t), redistest.Start(t)
	if err := replica.ReplicaOf(primary.Addr()); err != nil {
		t.Fatal(err)
	}
	admin := primary.Client(t)
	eventuallyTrue(t, "the replica attached", func() bool {
		info, _ := admin.Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:1")
	})
	c := primary.UserClient(t, lease.DefaultKeyPrefix)
	m := newManager(t, c, lease.WithReplicaAcks(1, 2*time.Second))
	l, err := m.TryAcquire(ctx, "acl-acks")
	if err != nil {
		t.Fatalf("TryAcquire with replica acks: %v", err)
	}
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend with replica acks: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if log := primary.ACLLog(t); len(log) != 0 {
		t.Errorf("the primary refused: %q", log)
	}

	var (
		servers []*redistest.Server
		clients []redis.UniversalClient
		mons    []*redistest.Monitor
	)
	for range 3 {
		s := redistest.Start(t)
		c := s.UserClient(t, lease.DefaultKeyPrefix)
		servers, clients, mons = append(servers, s), append(clients, c), append(mons, s.Monitor(t))
	}
	q, err := lease.NewQuorum(clients, lease.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		ql, err := q.TryAcquire(ctx, fmt.Sprintf("acl-q%d", i))
		if err != nil {
			t.Fatalf("quorum TryAcquire: %v", err)
		}
		if err := ql.Extend(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := ql.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	raised := false
	for i, s := range servers {
		sadmin := s.Client(t)
		cmds := mons[i].Stop(t)
		// raise.lua: EVALSHA sha 2 lease fence token fence (renew.lua
		// passes a third argument).
		raised = raised || slices.ContainsFunc(cmds, func(c redistest.Command) bool {
			return c.Client != "lua" && len(c.Args) == 7 && strings.EqualFold(c.Args[0], "evalsha") && c.Args[2] == "2"
		})
		if log := s.ACLLog(t); len(log) != 0 {
			t.Errorf("server %d refused: %q", i, log)
		}
		v, err := redistest.ScriptKeyViolations(ctx, sadmin, cmds)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range v {
			t.Error(line)
		}
	}
	if !raised {
		// The nodes' fences come from their clocks in microseconds: five
		// acquisitions with equal fences on a majority would be a
		// surprise, and leave raise.lua untested.
		t.Error("raise.lua never ran")
	}
}

// wantRedisError fails the test unless err wraps a server error reply
// starting with prefix, found by errors.As as go-redis's redis.Error.
func wantRedisError(t *testing.T, what string, err error, prefix string) {
	t.Helper()
	var re redis.Error
	if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), prefix) {
		t.Errorf("%s: %v (%T), want a redis.Error starting %q", what, err, err, prefix)
	}
}

// A refused command or authentication reaches the caller as the server's
// error: errors.As finds go-redis's redis.Error in it.
func TestPermissionErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := redistest.Start(t)
	admin := s.Client(t)
	c := s.UserClient(t, lease.DefaultKeyPrefix)
	m := newManager(t, c, lease.WithTTL(20*time.Second))
	held := map[string]*lease.Lease{}
	for _, n := range []string{"p-release", "p-extend", "p-exec", "p-script"} {
		l, err := m.TryAcquire(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		held[n] = l
	}
	setUser := func(rules ...any) {
		t.Helper()
		if err := admin.Do(ctx, append([]any{"acl", "setuser", "tenure"}, rules...)...).Err(); err != nil {
			t.Fatal(err)
		}
	}

	setUser("-evalsha", "-eval")
	_, err := m.TryAcquire(ctx, "p-new")
	wantRedisError(t, "TryAcquire without EVALSHA", err, "NOPERM")
	_, err = m.Acquire(ctx, "p-new")
	wantRedisError(t, "Acquire without EVALSHA", err, "NOPERM")
	wantRedisError(t, "Do without EVALSHA", m.Do(ctx, "p-new", func(context.Context) error { return nil }), "NOPERM")
	wantRedisError(t, "Extend without EVALSHA", held["p-extend"].Extend(ctx, 30*time.Second), "NOPERM")
	wantRedisError(t, "Release without EVALSHA", held["p-release"].Release(ctx), "NOPERM")
	setUser("+evalsha", "+eval", "-multi")
	_, err = held["p-exec"].Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tenure:{p-exec}:data", "x", 0)
		return nil
	})
	wantRedisError(t, "Exec without MULTI", err, "NOPERM")
	// A command a script calls: renew.lua's PEXPIRE.
	setUser("+multi", "-pexpire")
	// Redis 7.0 and 7.2+ (and Valkey) word it differently; refusal knows both.
	if err := held["p-script"].Extend(ctx, time.Minute); refusal.Of(err) != refusal.Script {
		t.Errorf("Extend without PEXPIRE: %v (%T), want a script's refused command", err, err)
	}
	setUser("+pexpire")

	// A wrong password, and none at all.
	o := s.Options()
	o.Username, o.Password = "tenure", "wrong"
	wrong := redis.NewClient(o)
	defer wrong.Close()
	_, err = newManager(t, wrong).TryAcquire(ctx, "p-auth")
	wantRedisError(t, "TryAcquire with a wrong password", err, "WRONGPASS")
	if err := admin.ConfigSet(ctx, "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	anon := redis.NewClient(s.Options())
	defer anon.Close()
	_, err = newManager(t, anon).TryAcquire(ctx, "p-auth")
	wantRedisError(t, "TryAcquire without a password", err, "NOAUTH")
	if err := admin.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
		t.Fatal(err)
	}
}
