package main

// tenure-redisson: package redisson's RLock, the lock a Java service takes
// with Redisson, in scenarios 1 and 2 beside tenure's own lease: the same
// watchdog, Redisson's hash, field and count, and Redisson's scripts'
// effects (an unlock latch key written at every unlock; a waiter's
// subscription opened per waited name).

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/redisson"
)

func redissonImpl() impl {
	return impl{Name: "tenure-redisson", Note: "package redisson: Redisson's RLock on tenure's watchdog; woken by Redisson's release message " +
		"(a subscription per waited name), backoff 50ms…1s as a fallback, capped by the holder's TTL",
		new: func(c *redis.Client, ttl time.Duration) (locker, error) {
			cl, err := redisson.New(c, redisson.WithWatchdogTimeout(ttl))
			if err != nil {
				return nil, err
			}
			return redissonLocker{cl}, nil
		}}
}

type redissonLocker struct{ c *redisson.Client }

func (r redissonLocker) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	h, err := r.c.GetLock(key).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return h.Unlock, nil
}
func (r redissonLocker) close() error { return r.c.Close() }
