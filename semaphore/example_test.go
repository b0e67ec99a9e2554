package semaphore_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/semaphore"
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
	permits := semaphore.New(m)
	ctx := context.Background()

	// At most 3 report builders at once; this one takes 1 permit, and a
	// large report takes 2 in one request.
	p, err := permits.Acquire(ctx, "example-builders", 3)
	if err != nil {
		panic(err)
	}
	big, err := permits.AcquireN(ctx, "example-builders", 3, 2)
	if err != nil {
		panic(err)
	}
	free, _ := permits.Available(ctx, "example-builders", 3)
	fmt.Println("free:", free)
	_, err = permits.TryAcquire(ctx, "example-builders", 3)
	fmt.Println("a fourth waits:", err != nil)

	_ = big.Release(ctx) // frees both of its permits
	free, _ = permits.Available(ctx, "example-builders", 3)
	fmt.Println("free:", free)
	_ = p.Release(ctx)

	err = permits.Do(ctx, "example-builders", 3, func(ctx context.Context) error {
		// ctx is cancelled if the permit is lost; Do then returns ErrLost.
		fmt.Println("building under a permit")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// free: 0
	// a fourth waits: true
	// free: 2
	// building under a permit
	// done: <nil>
}
