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

// TestClusterKilledPrimaryKeepsLeases kills a Cluster primary (SIGKILL: its
// connections are refused, it answers no MOVED) just before its leases'
// first renewal, with the client's slot map freshly loaded. The Cluster
// promotes the primary's replica, which has the leases, within a few
// seconds: a third of the TTL. The renewals retried meanwhile must find the
// promoted replica, so that none of the leases is lost. go-redis reloads a
// Cluster's slot map by itself only once it is 10s old: later than these
// leases' deadline, which is why the backend reloads it when a node cannot
// be reached.
func TestClusterKilledPrimaryKeepsLeases(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3, 1)
	cc := cl.Client(t)
	const ttl, interval = 12 * time.Second, 4 * time.Second
	m := newManager(t, cc, lease.WithTTL(ttl), lease.WithRenewInterval(interval))
	nodes := cl.Nodes()
	victim, replica := nodes[0], nodes[3] // redistest: replica k serves primary k mod 3
	var doomed []*lease.Lease
	acquired := time.Now()
	for i := 0; len(doomed) < 20; i++ {
		if i > 10_000 {
			t.Fatal("no names on the first primary")
		}
		name := fmt.Sprint("kill-", i)
		l, err := m.TryAcquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := cc.MasterForKey(ctx, "tenure:{"+name+"}"); err != nil {
			t.Fatal(err)
		} else if c.Options().Addr == victim.Addr() {
			doomed = append(doomed, l)
		}
	}
	// Fresh slot map, then the kill, shortly before the first renewals.
	time.Sleep(time.Until(acquired.Add(interval - time.Second)))
	cc.ReloadState(ctx)
	time.Sleep(500 * time.Millisecond)
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	promoted := waitPromoted(ctx, t, replica)
	t.Logf("replica promoted %v after the kill", promoted.Sub(killed).Round(time.Millisecond))
	// Every lease is renewed on the promoted replica or lost by its
	// deadline at the kill.
	last := doomed[0].Deadline()
	for _, l := range doomed {
		if d := l.Deadline(); d.After(last) {
			last = d
		}
	}
	if promoted.After(last.Add(-interval / 2)) {
		t.Fatalf("the failover took %v, too close to the leases' deadline %v after the kill: nothing to judge (a machine too loaded?)",
			promoted.Sub(killed), last.Sub(killed))
	}
	time.Sleep(time.Until(last.Add(time.Second)))
	rc := redis.NewClient(replica.Options())
	defer rc.Close()
	for _, l := range doomed {
		if err := l.Err(); err != nil {
			t.Fatalf("lease %s lost although its primary's replica was promoted %v before its deadline: %v",
				l.Name(), last.Sub(promoted).Round(time.Millisecond), context.Cause(l.Context()))
		}
		if got := rc.Get(ctx, "tenure:{"+l.Name()+"}").Val(); got != l.Token() {
			t.Fatalf("lease %s: the promoted replica holds %q, not the holder's token", l.Name(), got)
		}
	}
}

// waitPromoted waits, up to a minute, for s to report itself a primary,
// and returns when it did.
func waitPromoted(ctx context.Context, t *testing.T, s *redistest.Server) time.Time {
	t.Helper()
	c := redis.NewClient(s.Options())
	defer c.Close()
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(c.Info(ctx, "replication").Val(), "role:master") {
			return time.Now()
		}
	}
	t.Fatalf("replica %s not promoted within a minute", s.Addr())
	return time.Time{}
}
