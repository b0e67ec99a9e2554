package redisson_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/redisson"
)

// A Go service takes the lock a Java service takes with
// redisson.getLock("invoices"): the same hash, field and count.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
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

// A Go service takes a token from the counter a Java RFencedLock draws
// from, and passes it to the resource it writes, which refuses older ones.
func ExampleClient_GetFencedLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer rdb.Close()
	client, err := redisson.New(rdb)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()

	h, err := client.GetFencedLock("ledger").Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Unlock(ctx)
	counter := rdb.Get(ctx, "redisson_lock_token:{ledger}").Val()
	fmt.Println(h.Token() > 0, fmt.Sprint(h.Token()) == counter)
	// Output: true true
}

// Readers share a Redisson read-write lock; a writer waits for them.
func ExampleClient_GetReadWriteLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer rdb.Close()
	client, err := redisson.New(rdb)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()
	rw := client.GetReadWriteLock("catalog")

	r1, _ := rw.ReadLock().Lock(ctx)
	r2, _ := rw.ReadLock().Lock(ctx) // another owner: readers share
	fmt.Println(rdb.HGet(ctx, "catalog", "mode").Val())
	if _, err := rw.WriteLock().TryLock(ctx); err != nil {
		fmt.Println("writer waits")
	}
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	w, err := rw.WriteLock().TryLock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(rdb.HGet(ctx, "catalog", "mode").Val())
	_ = w.Unlock(ctx)
	// Output:
	// read
	// writer waits
	// write
}

// A Go service waits in the queue of a Java service's
// redisson.getFairLock("payouts"): waiters get in first come, first
// served, each woken on its own channel by the release before it.
func ExampleClient_GetFairLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer rdb.Close()
	client, err := redisson.New(rdb)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()
	fair := client.GetFairLock("payouts")

	h, err := fair.Lock(ctx)
	if err != nil {
		panic(err)
	}
	waiting := make(chan *redisson.Hold)
	go func() {
		// Queues in redisson_lock_queue:{payouts}, listens on
		// redisson_lock__channel:{payouts}:<its field>.
		w, err := fair.Lock(redisson.WithOwner(ctx, redisson.Owner{ThreadID: 2}))
		if err != nil {
			panic(err)
		}
		waiting <- w
	}()
	for i := 0; i < 10000 && rdb.LLen(ctx, "redisson_lock_queue:{payouts}").Val() == 0; i++ {
		time.Sleep(time.Millisecond)
	}
	fmt.Println(rdb.LIndex(ctx, "redisson_lock_queue:{payouts}", 0).Val() == client.ID()+":2")
	_ = h.Unlock(ctx) // publishes 0 to the first waiter's channel
	w := <-waiting
	fmt.Println(rdb.LLen(ctx, "redisson_lock_queue:{payouts}").Val())
	_ = w.Unlock(ctx)
	// Output:
	// true
	// 0
}

// A Go service takes a permit of the semaphore a Java service takes with
// redisson.getPermitExpirableSemaphore("exports"), leased for a minute:
// its context ends before the permit could expire in this host's clock.
func ExampleClient_GetPermitExpirableSemaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer rdb.Close()
	client, err := redisson.New(rdb)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()

	sem := client.GetPermitExpirableSemaphore("exports")
	if _, err := sem.TrySetPermits(ctx, 2); err != nil { // unless a Java service set them first
		panic(err)
	}
	p, err := sem.Acquire(ctx, time.Minute)
	if err != nil {
		panic(err)
	}
	free, _ := sem.AvailablePermits(ctx)
	deadline, _ := p.Deadline()
	fmt.Println(len(p.ID()), free, time.Until(deadline) < time.Minute)
	// Work under p.Context(), which ends at the local deadline.
	if err := p.Release(ctx); err != nil { // publishes the free permits on redisson_sc:{exports}
		panic(err)
	}
	free, _ = sem.AvailablePermits(ctx)
	fmt.Println(free, p.Err() != nil)
	rdb.Del(ctx, "exports")
	// Output:
	// 32 1 true
	// 2 true
}

// A Go service takes "stock" and "orders" together, as a Java service's
// redisson.getMultiLock(stock, orders) does: all or none, in one order
// whatever the order given, each renewed by the Client's watchdog.
func ExampleClient_GetMultiLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer rdb.Close()
	client, err := redisson.New(rdb)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()

	multi, err := client.GetMultiLock(client.GetLock("stock"), client.GetFencedLock("orders"))
	if err != nil {
		panic(err)
	}
	mh, err := multi.Lock(ctx)
	if err != nil {
		panic(err) // none of the names is held
	}
	for _, h := range mh.Holds() {
		fmt.Println(h.Name(), rdb.HGet(ctx, h.Name(), h.Field()).Val())
	}
	// Work under mh.Context(), which ends when any of the names is lost.
	if err := mh.Unlock(ctx); err != nil {
		panic(err)
	}
	fmt.Println(rdb.Exists(ctx, "stock", "orders").Val(), mh.Err())
	// Output:
	// orders 1
	// stock 1
	// 0 lease: released
}

// A Go service takes three permits at once, all or none, as a Java
// service's acquire(3, leaseTime) does, and gives them back by their ids,
// as Java's release(ids).
func ExamplePermitSemaphore_AcquireN() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	defer rdb.Close()
	client, err := redisson.New(rdb)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()

	sem := client.GetPermitExpirableSemaphore("uploads")
	if err := sem.SetPermits(ctx, 4); err != nil {
		panic(err)
	}
	ps, err := sem.AcquireN(ctx, 3, time.Minute)
	if err != nil {
		panic(err)
	}
	left, _ := sem.LeaseTime(ctx, ps[0].ID())
	free, _ := sem.AvailablePermits(ctx)
	fmt.Println(len(ps), free, left > 0 && left <= time.Minute)
	if _, err := sem.TryAcquireN(ctx, 2, time.Minute); err != nil {
		fmt.Println("two more are not free: none taken")
	}
	ids := []string{ps[0].ID(), ps[1].ID(), ps[2].ID()}
	if err := sem.ReleaseIDs(ctx, ids...); err != nil {
		panic(err)
	}
	free, _ = sem.AvailablePermits(ctx)
	fmt.Println(free, ps[0].Err())
	rdb.Del(ctx, "uploads")
	// Output:
	// 3 1 true
	// two more are not free: none taken
	// 4 lease: released
}
