package main

// tenure-redisson: package redisson's RLock, the lock a Java service takes
// with Redisson, in scenarios 1 and 2 beside tenure's own lease: the same
// watchdog, Redisson's hash, field and count, and Redisson's scripts'
// effects (an unlock latch key written at every unlock; a waiter's
// subscription opened per waited name).

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/redisson"
)

func redissonImpl() impl {
	return impl{Name: "tenure-redisson", Note: "package redisson: Redisson's RLock on tenure's watchdog; woken by Redisson's release message " +
		"(a subscription per waited name), backoff 50ms…1s as a fallback, capped by the holder's TTL",
		new: func(c *redis.Client, ttl time.Duration) (locker, error) {
			// redisson.New refuses a client that resends (a resent lock
			// script counts an entry twice): one of c's options with
			// MaxRetries -1, counted by c's hook.
			o := *c.Options()
			o.MaxRetries = -1
			once := redis.NewClient(&o)
			if h, ok := counters.Load(c); ok {
				once.AddHook(h.(*counter))
			}
			cl, err := redisson.New(once, redisson.WithWatchdogTimeout(ttl))
			if err != nil {
				_ = once.Close()
				return nil, err
			}
			return redissonLocker{cl, once}, nil
		}}
}

type redissonLocker struct {
	c    *redisson.Client
	once *redis.Client
}

func (r redissonLocker) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	h, err := r.c.GetLock(key).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return h.Unlock, nil
}
func (r redissonLocker) close() error { return errors.Join(r.c.Close(), r.once.Close()) }
