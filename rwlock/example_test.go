package rwlock_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
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
	locks := rwlock.New(m)
	ctx := context.Background()

	// Readers share the lock: another reader (elsewhere, so not under
	// RDo's context, which carries this read lock) gets in beside.
	err = locks.RDo(ctx, "example-catalog", func(ctx context.Context) error {
		other, err := locks.TryRLock(context.Background(), "example-catalog")
		if err != nil {
			return err
		}
		fmt.Println("reading")
		return other.Release(ctx)
	})
	fmt.Println("read done:", err)

	// A writer writes, then downgrades to a read lock: no other writer can
	// get in between, and readers may join it.
	w, err := locks.Lock(ctx, "example-catalog")
	if err != nil {
		panic(err)
	}
	fmt.Println("writing")
	r, err := locks.Downgrade(ctx, w)
	if err != nil {
		panic(err)
	}
	fmt.Println("write lock ended:", context.Cause(w.Context()))
	fmt.Println("fence grew:", r.Fence() > w.Fence())
	_, err = locks.TryLock(ctx, "example-catalog")
	fmt.Println("another writer waits:", err != nil)
	_ = r.Release(ctx)
	// Output:
	// reading
	// read done: <nil>
	// writing
	// write lock ended: lease: released
	// fence grew: true
	// another writer waits: true
}
