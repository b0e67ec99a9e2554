package backend_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Issue 46, item 6: one renew_node.lua call renews the leases of one
// primary, p}1 and p}2 among ten of other slots, while p}1's and p}2's slot
// migrates: only p}1's counter has moved, and both of p}2's keys. The node
// refuses the script p}1's counter (a key missing from a MIGRATING slot)
// and p}2's key. Whatever the order of the leases in the call, and so
// whichever node runs it, every lease is renewed and answered so, and
// each counter is refreshed where it is.
func TestClusterRenewNodeMigratingSlot(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	ctx := context.Background()
	cc := cl.Client(t)
	be := backend.NewRedis(cc, "tenure:")
	src, err := cc.MasterForKey(ctx, "tenure:{p}1}")
	if err != nil {
		t.Fatal(err)
	}
	names := append([]string{"p}1", "p}2"}, nodeNames(ctx, t, cc, "tenure:{p}1}", 10)...)
	for _, name := range names {
		a, err := be.Acquire(ctx, backend.Request{Name: name, Token: "tok-" + name, TTL: 10 * time.Second})
		if err != nil || !a.Acquired {
			t.Fatalf("%s: %+v %v", name, a, err)
		}
	}
	dst := migrating(ctx, t, cl, src, "tenure:{p}1}")
	migrate(ctx, t, src, dst, "tenure:{p}1}:fence", "tenure:{p}2}", "tenure:{p}2}:fence")

	others := names[2:]
	orders := map[string][]string{
		"Last":        append(append([]string(nil), others...), "p}1", "p}2"),
		"CounterKey1": append([]string{"p}1"}, append(append([]string(nil), others...), "p}2")...),
		"MovedKey1":   append([]string{"p}2", "p}1"}, others...),
	}
	ttl := time.Minute
	for _, order := range []string{"Last", "CounterKey1", "MovedKey1"} {
		t.Run(order, func(t *testing.T) {
			ttl += time.Minute // longer than the last: PEXPIRE ... GT must show it
			items := make([]backend.Item, len(orders[order]))
			for i, name := range orders[order] {
				items[i] = backend.Item{Name: name, Token: "tok-" + name, TTL: ttl}
			}
			errs := make([]error, len(items))
			be.Renew(ctx, items, errs)
			for i, err := range errs {
				if err != nil {
					t.Errorf("%s: %v", items[i].Name, err)
				}
			}
			for _, name := range names {
				at := src
				if name == "p}2" {
					at = dst
				}
				checkPTTL(ctx, t, at, "tenure:{"+name+"}", ttl)
			}
			checkPTTL(ctx, t, dst, "tenure:{p}1}:fence", 2*ttl)
			checkPTTL(ctx, t, dst, "tenure:{p}2}:fence", 2*ttl)
		})
	}
}

// checkPTTL fails t unless key on node c (read under ASKING, which a
// node importing its slot needs) has a TTL of about want: at most want,
// and more than want less 30s, which a renewal that left the key alone
// cannot give it (each subtest renews a minute longer than the last).
func checkPTTL(ctx context.Context, t *testing.T, c *redis.Client, key string, want time.Duration) {
	t.Helper()
	var d *redis.DurationCmd
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "ASKING")
		d = p.PTTL(ctx, key)
		return nil
	}); err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	if got := d.Val(); got > want || got <= want-30*time.Second {
		t.Errorf("%s on %s has a TTL of %v, want %v: not renewed", key, c.Options().Addr, got, want)
	}
}

// nodeNames returns n lease names whose keys are in slots other than key's,
// on the primary that serves key.
func nodeNames(ctx context.Context, t *testing.T, cc *redis.ClusterClient, key string, n int) []string {
	t.Helper()
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{backend.Slot(key): true}
	var names []string
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprint("o", i)
		k := "tenure:{" + name + "}"
		at, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if s := backend.Slot(k); !seen[s] && at.Options().Addr == node.Options().Addr {
			seen[s] = true
			names = append(names, name)
		}
	}
	return names
}

// migrating sets key's slot MIGRATING on src, its primary, and IMPORTING on
// another primary, which it returns.
func migrating(ctx context.Context, t *testing.T, cl *redistest.Cluster, src *redis.Client, key string) *redis.Client {
	t.Helper()
	var dst *redis.Client
	for _, n := range cl.Nodes() {
		if n.Addr() != src.Options().Addr {
			dst = n.Client(t)
			break
		}
	}
	id := func(c *redis.Client) string {
		s, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := backend.Slot(key)
	for _, cmd := range [][]any{
		{dst, "CLUSTER", "SETSLOT", s, "IMPORTING", id(src)},
		{src, "CLUSTER", "SETSLOT", s, "MIGRATING", id(dst)},
	} {
		if err := cmd[0].(*redis.Client).Do(ctx, cmd[1:]...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd[1:], err)
		}
	}
	return dst
}

// migrate moves keys from src to dst (MIGRATE).
func migrate(ctx context.Context, t *testing.T, src, dst *redis.Client, keys ...string) {
	t.Helper()
	_, port, _ := strings.Cut(dst.Options().Addr, ":")
	args := []any{"MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := src.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}
