package reentrant_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
)

// transfer locks the account it works on, whether or not its caller holds
// that lock already.
func transfer(ctx context.Context, locker *reentrant.Locker, account string) error {
	lk, err := locker.Lock(ctx, account)
	if err != nil {
		return err
	}
	defer lk.Unlock(context.Background())
	_, err = lk.Exec(lk.Context(), func(p redis.Pipeliner) error {
		p.IncrBy(lk.Context(), "balance:{"+account+"}", -10)
		return nil
	})
	return err
}

func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	locker := reentrant.New(m)

	ctx := context.Background()
	lk, err := locker.Lock(ctx, "account:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Under the lock's context, the same owner enters again instead of
	// waiting for itself.
	if err := transfer(lk.Context(), locker, "account:42"); err != nil {
		fmt.Println(err)
		return
	}
	count, _ := client.HGet(ctx, "tenure:{account:42}", lk.Owner()).Result()
	fmt.Println("entries after the transfer:", count)
	if err := lk.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	held, _ := client.Exists(ctx, "tenure:{account:42}").Result()
	fmt.Println("keys after the last unlock:", held)
	// Output:
	// entries after the transfer: 1
	// keys after the last unlock: 0
}
