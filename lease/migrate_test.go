package lease_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// docs/design.md section 8: a slot migrated key by key keeps every lease of
// it. Renewals of one manager's leases on one Cluster node go in one
// renew_node.lua call, routed by its first lease's key; while the slot
// migrates, that key may already be on the importing node, and the call is
// redirected there (ASK) and run under ASKING, where the keys not yet moved
// read as missing.
func TestClusterMigrationKeepsLeases(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Two leases of one slot (names m}1 and m}2: keys tenure:{m}1} and
	// tenure:{m}2}, hash tag "m"), renewed in one call. The slot is set
	// migrating and only the first lease's keys are moved: the call is
	// answered ASK by the source and run on the target, where the second
	// lease's key is not. Both must stay held, the second on the source
	// with its token, until the rest of the slot moves.
	t.Run("PartialMigrate", func(t *testing.T) {
		m := newManager(t, cl.Client(t), lease.WithTTL(2*time.Second))
		var held []*lease.Lease
		for _, name := range []string{"m}1", "m}2"} {
			l, err := m.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		mv := startMove(ctx, t, cl, "tenure:{m}1}")
		mv.migrate("tenure:{m}1}", "tenure:{m}1}:fence")
		time.Sleep(6 * time.Second) // three TTLs: nine renewals in one call each
		checkHeld(t, held, "with the first lease's keys moved")
		if got := mv.src.Get(ctx, "tenure:{m}2}").Val(); got != held[1].Token() {
			t.Fatalf("the source holds %q for m}2, want its token", got)
		}
		mv.finish()
		time.Sleep(4 * time.Second)
		checkHeld(t, held, "after the migration")
		for _, l := range held {
			if got := mv.dst.Get(ctx, "tenure:{"+l.Name()+"}").Val(); got != l.Token() {
				t.Fatalf("the new owner holds %q for %s, want its token", got, l.Name())
			}
		}
	})

	// A slot moved as redis-cli --cluster reshard moves it, one key at a
	// time, while twenty leases of that slot are held and renewed, each
	// renewal call holding several of them.
	t.Run("Reshard", func(t *testing.T) {
		m := newManager(t, cl.Client(t), lease.WithTTL(2*time.Second))
		var held []*lease.Lease
		for i := range 20 {
			l, err := m.TryAcquire(ctx, fmt.Sprint("r}", i))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		mv := startMove(ctx, t, cl, "tenure:{r}0}")
		for {
			keys, err := mv.src.ClusterGetKeysInSlot(ctx, mv.slot, 1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) == 0 {
				break
			}
			mv.migrate(keys...)
			time.Sleep(150 * time.Millisecond) // renewals between two keys
		}
		mv.finish()
		time.Sleep(4 * time.Second)
		checkHeld(t, held, "after a reshard key by key")
		for _, l := range held {
			if got := mv.dst.Get(ctx, "tenure:{"+l.Name()+"}").Val(); got != l.Token() {
				t.Fatalf("the new owner holds %q for %s, want its token", got, l.Name())
			}
		}
	})
}

// A move is a slot being migrated from the primary that serves key to
// another.
type move struct {
	t        *testing.T
	ctx      context.Context
	cl       *redistest.Cluster
	slot     int
	src, dst *redis.Client
	ids      map[string]string
	clients  map[string]*redis.Client
	dstPort  string
	srcAddr  string
	dstAddr  string
}

// startMove sets key's slot IMPORTING on another primary and MIGRATING on
// its own.
func startMove(ctx context.Context, t *testing.T, cl *redistest.Cluster, key string) *move {
	t.Helper()
	cc := cl.Client(t)
	mv := &move{t: t, ctx: ctx, cl: cl, slot: int(cc.ClusterKeySlot(ctx, key).Val())}
	src, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	mv.ids, mv.clients = nodeIDs(ctx, t, cl)
	mv.srcAddr = src.Options().Addr
	for _, n := range cl.Nodes()[:3] {
		if n.Addr() != mv.srcAddr {
			mv.dstAddr = n.Addr()
			break
		}
	}
	mv.src, mv.dst = mv.clients[mv.srcAddr], mv.clients[mv.dstAddr]
	mv.dstPort = strings.TrimPrefix(mv.dstAddr, "127.0.0.1:")
	mv.do(mv.dst, "CLUSTER", "SETSLOT", mv.slot, "IMPORTING", mv.ids[mv.srcAddr])
	mv.do(mv.src, "CLUSTER", "SETSLOT", mv.slot, "MIGRATING", mv.ids[mv.dstAddr])
	return mv
}

func (mv *move) do(c *redis.Client, args ...any) {
	mv.t.Helper()
	if err := c.Do(mv.ctx, args...).Err(); err != nil {
		mv.t.Fatalf("%v: %v", args, err)
	}
}

// migrate moves keys (those that exist) to the importing node.
func (mv *move) migrate(keys ...string) {
	mv.t.Helper()
	args := []any{"MIGRATE", "127.0.0.1", mv.dstPort, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	mv.do(mv.src, args...)
}

// finish moves the slot's remaining keys and gives the slot to the
// importing node on every primary.
func (mv *move) finish() {
	mv.t.Helper()
	for {
		keys, err := mv.src.ClusterGetKeysInSlot(mv.ctx, mv.slot, 100).Result()
		if err != nil {
			mv.t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		mv.migrate(keys...)
	}
	for _, n := range mv.cl.Nodes()[:3] {
		mv.do(mv.clients[n.Addr()], "CLUSTER", "SETSLOT", mv.slot, "NODE", mv.ids[mv.dstAddr])
	}
}

func checkHeld(t *testing.T, held []*lease.Lease, when string) {
	t.Helper()
	for _, l := range held {
		if err := l.Err(); err != nil {
			t.Fatalf("%s lost %s: %v", l.Name(), when, context.Cause(l.Context()))
		}
	}
}

// Issue 46, item 6: a lease whose fence counter alone has moved to the
// importing node, renewed in one renew_node.lua call with ten leases of
// other slots of the same primary. The source still serves the lease's key;
// the counter, missing from a MIGRATING slot, is a key the script may not
// touch there. That one lease's counter must cost none of the others, and
// not the lease itself: Redis still holds every one of them with its token.
func TestClusterMigratingCounterKeepsNodeLeases(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cc := cl.Client(t)
	const ttl = 2 * time.Second
	m := newManager(t, cc, lease.WithTTL(ttl))
	names := append([]string{"p}1"}, sameNodeNames(ctx, t, cc, "tenure:{p}1}", 10)...)
	var held []*lease.Lease
	for _, name := range names {
		l, err := m.TryAcquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	const counter = "tenure:{p}1}:fence"
	mv := startMove(ctx, t, cl, "tenure:{p}1}")
	mv.migrate(counter)
	time.Sleep(3 * ttl) // two counter TTLs less a renewal: nine renewals of each
	var lost []string
	for _, l := range held {
		if l.Err() != nil {
			lost = append(lost, fmt.Sprintf("%s (%v)", l.Name(), context.Cause(l.Context())))
		}
	}
	if len(lost) > 0 {
		t.Fatalf("with p}1's counter moved, %d of %d leases were lost: %v", len(lost), len(held), lost)
	}
	if got := mv.src.Get(ctx, "tenure:{p}1}").Val(); got != held[0].Token() {
		t.Fatalf("the source holds %q for p}1, want its token", got)
	}
	mv.finish()
	time.Sleep(ttl)
	checkHeld(t, held, "after the migration")
	// The counter was given two TTLs when it moved; renewals since must
	// have refreshed it where it went, or a held name would have lost it.
	if n := mv.dst.Exists(ctx, counter).Val(); n != 1 {
		t.Fatalf("p}1 is held but its counter is gone: the renewals did not refresh it on the importing node")
	}
}

// sameNodeNames returns n lease names whose keys are in slots other than
// key's, on the primary that serves key.
func sameNodeNames(ctx context.Context, t *testing.T, cc *redis.ClusterClient, key string, n int) []string {
	t.Helper()
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	own := cc.ClusterKeySlot(ctx, key).Val()
	seen := map[int64]bool{own: true}
	var names []string
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprint("o", i)
		k := "tenure:{" + name + "}"
		s := cc.ClusterKeySlot(ctx, k).Val()
		at, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[s] && at.Options().Addr == node.Options().Addr {
			seen[s] = true
			names = append(names, name)
		}
	}
	return names
}
