package redisson_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/redisson"
)

// A Go service takes the lock a Java service takes with
// redisson.getLock("invoices"): the same hash, field and count.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client, err := redisson.New(rdb)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()

	// An owner is a stable pair the context carries, as Java's thread.
	ctx = redisson.WithOwner(ctx, redisson.Owner{ThreadID: 1})
	h, err := client.GetLock("invoices").Lock(ctx)
	if err != nil {
		panic(err)
	}
	// Code under h.Context() re-enters instead of waiting for itself.
	inner, err := client.GetLock("invoices").Lock(h.Context())
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Field() == client.ID()+":1", rdb.HGet(ctx, "invoices", h.Field()).Val())
	_ = inner.Unlock(ctx)
	_ = h.Unlock(ctx) // the last one deletes the hash and publishes 0
	fmt.Println(rdb.Exists(ctx, "invoices").Val())
	// Output:
	// true 2
	// 0
}
