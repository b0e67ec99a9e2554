package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
)

// redisAddr is the server the examples use; the test binary points it at a
// redis-server of its own.
var redisAddr = "localhost:6379"

func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	ctx := context.Background()
	l, err := m.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)

	// Work under l.Context(): it is cancelled if the lease is lost.
	select {
	case <-l.Done():
		fmt.Println("lost:", context.Cause(l.Context()))
	case <-time.After(10 * time.Millisecond):
		fmt.Println("report written under fence", l.Fence() > 0)
	}
	// Output: report written under fence true
}

func ExampleManager_Do() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client, lease.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	err = m.Do(context.Background(), "billing-run", func(ctx context.Context) error {
		// ctx is cancelled if the lease is lost; Do then returns ErrLost.
		fmt.Println("billing under the lease")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// billing under the lease
	// done: <nil>
}

func ExampleManager_TryAcquire() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	ctx := context.Background()
	first, err := m.TryAcquire(ctx, "cron:cleanup")
	if err != nil {
		panic(err)
	}
	_, err = m.TryAcquire(ctx, "cron:cleanup")
	fmt.Println("second attempt held:", errors.Is(err, lease.ErrNotAcquired))
	_ = first.Release(ctx)
	// Output: second attempt held: true
}

func ExampleLease_Release() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	ctx := context.Background()
	l, err := m.Acquire(ctx, "migration")
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Release(ctx))
	// A second release is harmless.
	fmt.Println(errors.Is(l.Release(ctx), lease.ErrNotHeld))
	fmt.Println(context.Cause(l.Context()))
	// Output:
	// <nil>
	// true
	// lease: released
}

// A manager whose client never resends (MaxRetries -1) has no use for the
// marker a release leaves so that a resent copy is answered as the first:
// WithReleaseMemory(0) saves that write on every release.
func ExampleWithReleaseMemory() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	m, err := lease.New(client, lease.WithReleaseMemory(0))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	ctx := context.Background()
	l, err := m.Acquire(ctx, "thumbnail:42")
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Release(ctx))
	// Output: <nil>
}

// A transfer between two accounts holds both, whatever order the caller
// names them in: sets are taken in name order, so two transfers that share
// an account never deadlock.
func ExampleManager_AcquireAll() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	s, err := m.AcquireAll(context.Background(), []string{"account:2", "account:1"})
	if err != nil {
		panic(err)
	}
	// s.Context() is cancelled when either lease is lost; each name has
	// its own fence, for the resource that name guards.
	fmt.Println("holding", s.Names(), "with fences:", s.Fence("account:1") > 0 && s.Fence("account:2") > 0)
	fmt.Println("released:", s.Release(context.Background()))
	// Output:
	// holding [account:1 account:2] with fences: true
	// released: <nil>
}

// The function DoAll runs finds its Set, and each name's fence, with
// SetFromContext.
func ExampleManager_DoAll() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	err = m.DoAll(context.Background(), []string{"account:1", "account:2"}, func(ctx context.Context) error {
		s, _ := lease.SetFromContext(ctx)
		// A store that guards each account checks that account's fence.
		fmt.Println("fences:", s.Fence("account:1") > 0, s.Fence("account:2") > 0)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// fences: true true
	// done: <nil>
}
