package backend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/redistest"
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
	var items []backend.Item
	want := make([]error, 0, n+2)
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		a, err := be.Acquire(ctx, backend.Request{Name: name, Token: "tok", TTL: time.Second})
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
		case 4: // a longer TTL already (Extend): never shortened
			raw.PExpire(ctx, "p:{"+name+"}", time.Hour)
		case 5: // another TTL: another call
			it.TTL = 2 * time.Minute
		case 6: // the counter's last refresh still outlives this renewal
			it.Light = true
		}
		items = append(items, it)
		want = append(want, w)
	}
	// Other kinds in the same Renew: a reentrant lock and a permit.
	if _, err := be.Acquire(ctx, backend.Request{Name: "r", Token: "op", Owner: "o", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Acquire(ctx, backend.Request{Name: "s", Token: "permit", Limit: 2, TTL: time.Second}); err != nil {
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
		// A full renewal gives the counter one TTL more than the lease
		// key has (S6: it outlives the lease by at most a TTL); a light one
		// leaves it as the acquisition did (twice its TTL of 1s).
		ft := raw.PTTL(ctx, key+":fence").Val()
		lo, hi = ttl+it.TTL-5*time.Second, ttl+it.TTL+time.Second
		switch {
		case it.Light:
			lo, hi = time.Second, 2*time.Second
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
