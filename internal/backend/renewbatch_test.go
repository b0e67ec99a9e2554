package backend_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	tlease "github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Renewal of many leases at once (renew_leases.lua, in calls of a few
// hundred per node and slot, beside renew.lua for other kinds): every
// lease's own answer, whichever call it fell in, on one server and on a
// Cluster.
func TestRenewManyLeases(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		srv := redistest.Start(t)
		renewMany(t, srv.Client(t), srv.Client(t))
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.NewCluster(t, 3, 0)
		renewMany(t, c.Client(t), c.Client(t))
	})
}

func renewMany(t *testing.T, client, raw redis.UniversalClient) {
	be := backend.NewRedis(client, "p:")
	ctx := context.Background()
	const n = 700 // more than one call's worth on one server
	// The acquisitions' TTL leaves room for 700 of them one after another
	// on a loaded machine: at 1s, the first expired before the renewal.
	const acqTTL = 30 * time.Second
	var items []backend.Item
	want := make([]error, 0, n+2)
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		a, err := be.Acquire(ctx, backend.Request{Name: name, Token: "tok", TTL: acqTTL})
		if err != nil || !a.Acquired {
			t.Fatalf("%s: %+v %v", name, a, err)
		}
		it := backend.Item{Name: name, Token: "tok", TTL: time.Minute}
		var w error
		switch i % 7 {
		case 1: // taken over
			raw.Set(ctx, "p:{"+name+"}", "thief", time.Hour)
			w = backend.ErrNotHeld
		case 2: // deleted
			raw.Del(ctx, "p:{"+name+"}")
			w = backend.ErrGone
		case 3: // another kind
			raw.Del(ctx, "p:{"+name+"}")
			raw.HSet(ctx, "p:{"+name+"}", "owner", 1)
			w = backend.ErrNotHeld
		case 4: // a longer TTL already, as Extend leaves it (renew.lua: the
			// counter one TTL past the key): neither is shortened
			raw.PExpire(ctx, "p:{"+name+"}", time.Hour)
			raw.PExpire(ctx, "p:{"+name+"}:fence", time.Hour+time.Minute)
		case 5: // another TTL: another call
			it.TTL = 2 * time.Minute
		case 6: // the counter's last refresh still outlives this renewal
			it.Light = true
		}
		items = append(items, it)
		want = append(want, w)
	}
	// Other kinds in the same Renew: a reentrant lock and a permit.
	if _, err := be.Acquire(ctx, backend.Request{Name: "r", Token: "op", Owner: "o", TTL: acqTTL}); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Acquire(ctx, backend.Request{Name: "s", Token: "permit", Limit: 2, TTL: acqTTL}); err != nil {
		t.Fatal(err)
	}
	items = append(items, backend.Item{Name: "r", Token: "o", TTL: time.Minute, Reentrant: true},
		backend.Item{Name: "s", Token: "permit", TTL: time.Minute, Permit: true})
	want = append(want, nil, nil)

	errs := make([]error, len(items))
	be.Renew(ctx, items, errs)
	for i, it := range items {
		switch {
		case want[i] == nil && errs[i] != nil:
			t.Errorf("%s: %v, want renewed", it.Name, errs[i])
		case want[i] != nil && !errors.Is(errs[i], want[i]):
			t.Errorf("%s: %v, want %v", it.Name, errs[i], want[i])
		case want[i] == backend.ErrNotHeld && errors.Is(errs[i], backend.ErrGone):
			t.Errorf("%s: %v, want held by another", it.Name, errs[i])
		}
		if want[i] != nil {
			continue
		}
		key := "p:{" + it.Name + "}"
		ttl := raw.PTTL(ctx, key).Val()
		lo, hi := it.TTL-5*time.Second, it.TTL
		if i < n && i%7 == 4 {
			lo, hi = 59*time.Minute, time.Hour
		}
		if ttl < lo || ttl > hi {
			t.Errorf("%s: TTL %v after renewal, want in [%v, %v]", it.Name, ttl, lo, hi)
		}
		// A full renewal leaves the counter one TTL more than the lease
		// key has (S6: it outlives the lease by at most a TTL): twice the
		// TTL, or the longer TTL an Extend gave it; a light one leaves it
		// as the acquisition did (twice its TTL, less the time since).
		ft := raw.PTTL(ctx, key+":fence").Val()
		lo, hi = ttl+it.TTL-5*time.Second, ttl+it.TTL+time.Second
		switch {
		case it.Light:
			lo, hi = time.Second, 2*acqTTL
		case it.Permit: // a permit's counter lives as long as the set
			lo, hi = ttl-5*time.Second, ttl+time.Second
		}
		if ft < lo || ft > hi {
			t.Errorf("%s: counter TTL %v after renewal to %v (light %v), want in [%v, %v]", it.Name, ft, it.TTL, it.Light, lo, hi)
		}
	}
	// The thief's lease is untouched.
	if ttl := raw.PTTL(ctx, "p:{n1}").Val(); ttl < 59*time.Minute {
		t.Errorf("another holder's TTL changed to %v", ttl)
	}
}

// Names whose braces pick a hash tag of their keys other than the name's
// own ("x{t}": its keys hash "x{t", the name alone "t"), in families of
// one key slot so that renewals can be batched, each beside a name of
// the slot the name alone hashes to ("t"). Renewals grouped by the name's
// own slot mixed slots in one call, which failed CROSSSLOT on every retry
// until the leases were lost.
var braceNames = []string{
	"x{t}", "x{t}y", "x{t}{u}", "t",
	"{a}", "{a}}", "{a}b{c}", "a", "a}b{", "a}c",
	"job{7}", "job{7}:b", "7",
	"{{a}}", "{}", "\u00e9{\u00fc}",
}

// On a Cluster, the slot renewals are grouped by is the server's own
// (CLUSTER KEYSLOT) for names of any bytes and braces, and leases with
// such names are kept, their renewals batched.
func TestClusterBraceNames(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	t.Run("SlotIsKeyslot", func(t *testing.T) { slotIsKeyslot(t, cl.Nodes()[0].Client(t)) })
	t.Run("LeasesKept", func(t *testing.T) { braceLeasesKept(t, cl.Client(t)) })
	t.Run("BatchedByNode", func(t *testing.T) { batchedByNode(t, cl.Client(t)) })
	t.Run("SlotMoved", func(t *testing.T) { slotMoved(t, cl) })
}

// batchedByNode holds 600 leases of names spread over a 3-primary Cluster's
// 16,384 slots (few share one): grouped by slot, nearly every renewal call
// renewed one lease; renew_node.lua renews a node's leases in one call.
func batchedByNode(t *testing.T, cc *redis.ClusterClient) {
	ctx := context.Background()
	const ttl = time.Second
	m, h := hookedManager(t, cc, ttl)
	var held []*tlease.Lease
	for i := range 600 {
		l, err := m.TryAcquire(ctx, fmt.Sprint("spread-", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	h.batched.Store(0)
	h.inBatches.Store(0)
	time.Sleep(3 * ttl)
	for _, l := range held {
		if err := l.Err(); err != nil {
			t.Fatalf("%s lost: %v", l.Name(), err)
		}
	}
	calls, leases := h.batched.Load(), h.inBatches.Load()
	t.Logf("%d calls renewed several leases, %d leases in all", calls, leases)
	if calls == 0 || leases/calls < 50 {
		t.Fatalf("%d leases in %d batched calls: renewals were not grouped by node", leases, calls)
	}
	for _, l := range held {
		_ = l.Release(ctx)
	}
}

// slotMoved sends renew_node.lua to a node with a lease key that another
// node serves (as after a slot migration the caller has not seen yet): that
// lease's outcome is unknown (retried), not "not held" (lost).
func slotMoved(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	cc := cl.Client(t)
	here, there := "tenure:{here}", ""
	node, err := cc.MasterForKey(ctx, here)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; there == ""; i++ {
		k := fmt.Sprintf("tenure:{there-%d}", i)
		if n, err := cc.MasterForKey(ctx, k); err == nil && n.Options().Addr != node.Options().Addr {
			there = k
		}
	}
	cc.Set(ctx, here, "tok", time.Minute)
	cc.Set(ctx, there, "tok", time.Minute)
	failed, err := backend.RenewNode(ctx, node, time.Minute, []string{here, there}, []string{"tok", "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 2 || failed[0] != 2 || failed[1] != -2 {
		t.Fatalf("renew_node.lua answered %v, want [2 -2]: the lease the node does not serve is unknown, not lost", failed)
	}
}

// slotIsKeyslot compares the backend's slot of the lease and fence keys of
// a few hundred names of braces and other bytes (seeded, so a failure
// repeats) with node's CLUSTER KEYSLOT.
func slotIsKeyslot(t *testing.T, node *redis.Client) {
	ctx := context.Background()
	l := keys.Layout{Prefix: keys.DefaultPrefix}
	rnd := rand.New(rand.NewPCG(31, 4))
	alphabet := []string{"a", "b", "t", "7", ":", "{", "}", "{", "}", "\u00e9", "\u4e16", "\x00", " "}
	var ks []string
	for len(ks) < 2*400 {
		var b strings.Builder
		for range 1 + rnd.IntN(10) {
			b.WriteString(alphabet[rnd.IntN(len(alphabet))])
		}
		if name := b.String(); keys.CheckName(name) == nil {
			ks = append(ks, l.Lease(name), l.Fence(name))
		}
	}
	for _, n := range braceNames {
		ks = append(ks, l.Lease(n), l.Fence(n))
	}
	cmds := make([]*redis.IntCmd, len(ks))
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range ks {
			cmds[i] = p.ClusterKeySlot(ctx, k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, k := range ks {
		if got, want := backend.Slot(k), int(cmds[i].Val()); got != want {
			t.Errorf("slot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
		}
	}
}

// braceLeasesKept holds leases of braceNames at a short TTL for several
// TTLs through cc: none may be lost, no call refused CROSSSLOT, and some
// calls renewed several leases.
func braceLeasesKept(t *testing.T, cc *redis.ClusterClient) {
	ctx := context.Background()
	const ttl = time.Second
	m, h := hookedManager(t, cc, ttl)
	held := make([]*tlease.Lease, len(braceNames))
	for i, n := range braceNames {
		var err error
		if held[i], err = m.Acquire(ctx, n); err != nil {
			t.Fatalf("%q: %v", n, err)
		}
	}
	time.Sleep(4 * ttl) // a dozen renewals each
	for _, l := range held {
		if err := l.Err(); err != nil || l.Context().Err() != nil {
			t.Errorf("%q lost: %v (context: %v)", l.Name(), err, context.Cause(l.Context()))
		}
	}
	if n := h.crossSlot.Load(); n > 0 {
		t.Errorf("%d script calls refused CROSSSLOT", n)
	}
	if h.batched.Load() == 0 {
		t.Error("no call renewed two leases: renewals were not batched")
	}
	t.Logf("%d calls renewed several leases, %d of them in all", h.batched.Load(), h.inBatches.Load())
	for _, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Errorf("%q: release: %v", l.Name(), err)
		}
	}
}

// hookedManager returns a manager of ttl over cc, and the hook that counts
// the script calls cc sends.
func hookedManager(t *testing.T, cc *redis.ClusterClient, ttl time.Duration) (*tlease.Manager, *renewHook) {
	t.Helper()
	h := &renewHook{layout: keys.Layout{Prefix: tlease.DefaultKeyPrefix}}
	cc.AddHook(h)
	m, err := tlease.New(cc, tlease.WithTTL(ttl), tlease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, h
}

// renewHook counts, of the script calls a client sends, those given the
// lease keys of several names (renew_leases.lua's batches) and those the
// server refused CROSSSLOT.
type renewHook struct {
	layout                        keys.Layout
	batched, inBatches, crossSlot atomic.Int64
}

func (h *renewHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *renewHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.saw(cmd)
		return err
	}
}

func (h *renewHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.saw(c)
		}
		return err
	}
}

func (h *renewHook) saw(cmd redis.Cmder) {
	if name := cmd.Name(); name != "evalsha" && name != "eval" {
		return
	}
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "CROSSSLOT") {
		h.crossSlot.Add(1)
		return
	}
	args := cmd.Args()
	if len(args) < 3 || cmd.Err() != nil {
		return
	}
	n, _ := args[2].(int)
	leases := 0
	// renew_leases.lua declares every lease key; renew_node.lua declares
	// the first and passes them all among its arguments: count both.
	for _, k := range args[3:] {
		s, ok := k.(string)
		if p, isPtr := k.(*string); isPtr { // the backend's keys (script.call)
			s, ok = *p, true
		}
		if _, isLease := h.layout.NameOf(s); ok && isLease {
			leases++
		}
	}
	if n == 1 && leases > 1 { // renew_node.lua: KEYS[1] is also ARGV[3]
		leases--
	}
	if leases > 1 {
		h.batched.Add(1)
		h.inBatches.Add(int64(leases))
	}
}
