package reentrant_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Reentrant locks as a user with docs/security.md's rule: taking, entering
// again (through the Locker and through another Locker of the same owner),
// Exec, inner and outer exits, and waiting (barging and fair) for a lock
// another owner holds. The server refuses nothing, and no script touches
// a key it was not given.
func TestACLUserEveryFeature(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := redistest.Start(t)
	admin := s.Client(t)
	c := s.UserClient(t, lease.DefaultKeyPrefix)
	mon := s.Monitor(t)

	k1, k2 := reentrant.New(newManager(t, c)), reentrant.New(newManager(t, c))
	octx := reentrant.WithOwner(ctx, "owner-1")
	outer, err := k1.Lock(octx, "acl-r")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := k1.Lock(octx, "acl-r") // reenter.lua
	if err != nil {
		t.Fatal(err)
	}
	other, err := k2.Lock(octx, "acl-r") // acquire.lua's re-entry
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outer.Exec(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tenure:{acl-r}:data", "x", time.Minute)
		return nil
	}); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	for _, fair := range []bool{false, true} {
		got := make(chan error, 1)
		go func() {
			lk, err := k2.Lock(reentrant.WithOwner(ctx, "owner-2"), "acl-r", lease.WithFair(fair))
			if err == nil {
				err = lk.Unlock(ctx)
			}
			got <- err
		}()
		channel := "tenure:{acl-r}:released"
		for deadline := time.Now().Add(10 * time.Second); ; {
			n, _ := admin.PubSubNumSub(ctx, channel).Result()
			if n[channel] == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the waiter never subscribed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if fair {
			// Let go, and take it back for the next round.
			for _, lk := range []*reentrant.Lock{inner, other, outer} {
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			if err := inner.Unlock(ctx); err != nil { // an inner exit
				t.Fatal(err)
			}
			if err := other.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := outer.Unlock(ctx); err != nil { // frees the name
				t.Fatal(err)
			}
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter (fair %v): %v", fair, err)
		}
		if !fair {
			if outer, err = k1.Lock(octx, "acl-r"); err != nil {
				t.Fatal(err)
			}
			if inner, err = k1.Lock(octx, "acl-r"); err != nil {
				t.Fatal(err)
			}
			if other, err = k2.Lock(octx, "acl-r"); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.CheckUserRun(t, mon, lease.DefaultKeyPrefix)
}

// A refusal reaches the caller of Lock, a re-entry, Exec and Unlock.
func TestPermissionErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := redistest.Start(t)
	admin := s.Client(t)
	c := s.UserClient(t, lease.DefaultKeyPrefix)
	k := reentrant.New(newManager(t, c, lease.WithTTL(20*time.Second)))
	octx := reentrant.WithOwner(ctx, "owner")
	held, err := k.Lock(octx, "acl-p")
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "acl", "setuser", "tenure", "-evalsha", "-eval", "-multi").Err(); err != nil {
		t.Fatal(err)
	}
	want := func(what string, err error) {
		t.Helper()
		var re redis.Error
		if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "NOPERM") {
			t.Errorf("%s: %v, want a NOPERM redis.Error", what, err)
		}
	}
	_, err = k.Lock(octx, "acl-new")
	want("Lock", err)
	_, err = k.Lock(octx, "acl-p")
	want("a re-entry", err)
	_, err = held.Exec(ctx, func(p redis.Pipeliner) error { p.Set(ctx, "tenure:{acl-p}:x", 1, 0); return nil })
	want("Exec", err)
	want("Unlock", held.Unlock(ctx))
}
