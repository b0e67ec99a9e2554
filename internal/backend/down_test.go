package backend_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/tests/redistest"
)

// gatedDialer counts the client's dials by address, and, once blocked,
// holds every dial to that address until its context ends or the test
// does: a node that a renewal must not wait for.
type gatedDialer struct {
	mu      sync.Mutex
	n       map[string]int
	blocked string
	end     chan struct{}
}

func (d *gatedDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.n[addr]++
	blocked := addr == d.blocked
	d.mu.Unlock()
	if blocked {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.end:
			return nil, errors.New("test over")
		}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *gatedDialer) block(addr string) {
	d.mu.Lock()
	d.blocked = addr
	d.mu.Unlock()
}

func (d *gatedDialer) of(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[addr]
}

// A Cluster primary that died is not dialed by every renewal batch: once
// a batch could not reach it, the next one answers its leases at once
// (unknown: the watchdog retries them) and renews the live nodes' leases,
// without waiting for a dial to the dead one (here every such dial hangs
// for 30s); a probe after a while finds it still down. go-redis dials a
// node again for each pipeline that holds one of its calls, five tries
// 100ms apart, and a batch of every node's leases waited for that.
func TestDeadNodeIsNotDialedByEveryBatch(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3, 0)
	dials := &gatedDialer{n: map[string]int{}, end: make(chan struct{})}
	o := cl.ClusterOptions()
	o.Dialer, o.DialTimeout = dials.dial, 30*time.Second
	cc := redis.NewClusterClient(o)
	t.Cleanup(func() {
		close(dials.end)
		_ = cc.Close()
	})
	be := backend.NewRedis(cc, "p:")
	dead := cl.Nodes()[0].Addr()
	var items []backend.Item
	onDead := map[int]bool{}
	for i := range 60 {
		name := fmt.Sprint("d", i)
		if a, err := be.Acquire(ctx, backend.Request{Name: name, Token: "tok", TTL: time.Minute}); err != nil || !a.Acquired {
			t.Fatalf("%s: %+v %v", name, a, err)
		}
		c, err := cc.MasterForKey(ctx, "p:{"+name+"}")
		if err != nil {
			t.Fatal(err)
		}
		onDead[i] = c.Options().Addr == dead
		items = append(items, backend.Item{Name: name, Token: "tok", TTL: time.Minute})
	}
	// The live nodes keep serving their slots when the dead one's are
	// uncovered (by default a Cluster refuses every command once the
	// node timeout has passed).
	for _, n := range cl.Nodes() {
		c := n.NewClient()
		err := c.ConfigSet(ctx, "cluster-require-full-coverage", "no").Err()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Nodes()[0].Kill(); err != nil {
		t.Fatal(err)
	}
	renew := func(round string) (deadErrs []error) {
		errs := make([]error, len(items))
		done := make(chan struct{})
		go func() {
			defer close(done)
			be.Renew(ctx, items, errs)
		}()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: still renewing after 15s: waiting for a dial to the dead node", round)
		}
		for i, err := range errs {
			switch {
			case onDead[i]:
				if err == nil {
					t.Fatalf("%s: %s renewed on a dead node", round, items[i].Name)
				}
				deadErrs = append(deadErrs, err)
			case err != nil:
				t.Fatalf("%s: %s on a live node: %v", round, items[i].Name, err)
			}
		}
		if len(deadErrs) == 0 {
			t.Fatalf("%s: no lease on the dead node", round)
		}
		return deadErrs
	}
	renew("first batch") // finds the node down: its dials refused at once
	dials.block(dead)
	for _, err := range renew("second batch") {
		var reply redis.Error
		if errors.As(err, &reply) {
			t.Fatalf("a lease on the dead node answered %v, want a failure to reach it", err)
		}
	}
	before := dials.of(dead)
	time.Sleep(500 * time.Millisecond) // past the recheck: the next batch probes it
	renew("after the recheck")
	if dials.of(dead) == before {
		t.Fatal("no probe of the dead node after the recheck")
	}
}
