package main

// The lock implementations under test in scenarios 1 and 2 (and, adapted,
// 7): tenure, redsync, redislock and the raw baseline, each a locker bound
// to one client; and the client type that makes tenure renew one lease a
// call (tenure-per-item, scenarios 3 and 8).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
)

// A locker is one implementation under test, bound to one Redis client (one
// connection pool): tenure's Manager, a redsync instance, a redislock client
// or the raw baseline commands.
type locker interface {
	// acquire waits, by the implementation's own retry policy, until it
	// holds key or ctx ends; it returns the function that releases it.
	acquire(ctx context.Context, key string) (release func(context.Context) error, err error)
	close() error
}

// An impl names a way to build lockers, with the settings it runs under.
type impl struct {
	Name string // short label in tables and plots
	Note string // settings, for the report
	new  func(c *redis.Client, ttl time.Duration) (locker, error)
}

// quietLogger keeps tenure's warnings (a lease lost on purpose in scenario 4)
// out of the benchmark's output.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func tenureImpl(opts ...lease.Option) impl {
	return impl{Name: "tenure", Note: "Manager.Acquire: woken by the release message (one pub/sub connection per manager); default backoff 50ms…1s as a fallback, capped by the holder's TTL",
		new: func(c *redis.Client, ttl time.Duration) (locker, error) {
			m, err := lease.New(c, append([]lease.Option{lease.WithTTL(ttl), lease.WithLogger(quietLogger)}, opts...)...)
			if err != nil {
				return nil, err
			}
			return tenureLocker{m}, nil
		}}
}

type tenureLocker struct{ m *lease.Manager }

func (t tenureLocker) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := t.m.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}
func (t tenureLocker) close() error { return t.m.Close() }

// redsyncImpl builds redsync mutexes over one goredis/v9 pool. A zero delay
// keeps redsync's default (32 tries, a random 50–250ms between them).
// LockContext gives up after its tries with ErrFailed; like a user told to
// "retry by calling this method again", acquire then calls it again.
func redsyncImpl(delay time.Duration) impl {
	name, note := "redsync", "defaults: 32 tries, random 50–250ms apart; re-called when it gives up (ErrFailed or ErrTaken)"
	if delay > 0 {
		name = fmt.Sprintf("redsync-%v", delay)
		note = fmt.Sprintf("WithRetryDelay(%v), 32 tries; re-called when it gives up (ErrFailed or ErrTaken)", delay)
	}
	return impl{Name: name, Note: note, new: func(c *redis.Client, ttl time.Duration) (locker, error) {
		var opts []redsync.Option
		opts = append(opts, redsync.WithExpiry(ttl))
		if delay > 0 {
			opts = append(opts, redsync.WithRetryDelay(delay))
		}
		return &redsyncLocker{rs: redsync.New(goredis.NewPool(c)), opts: opts}, nil
	}}
}

type redsyncLocker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func (r *redsyncLocker) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	mu := r.rs.NewMutex(key, r.opts...)
	for {
		err := mu.LockContext(ctx)
		if err == nil {
			break
		}
		var taken *redsync.ErrTaken
		if ctx.Err() != nil || !(errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken)) {
			return nil, err
		}
	}
	return func(ctx context.Context) error {
		ok, err := mu.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock: not held")
		}
		return err
	}, nil
}
func (r *redsyncLocker) close() error { return nil }

// redislockImpl builds a redislock client. redislock's default is not to
// retry at all; a waiter needs a retry strategy, so the contended scenario
// uses LinearBackoff with the given step (0: default, no retry; acquire then
// calls Obtain again at once, which only makes sense uncontended).
func redislockImpl(step time.Duration) impl {
	name, note := "redislock", "defaults (no retry)"
	if step > 0 {
		name = fmt.Sprintf("redislock-%v", step)
		note = fmt.Sprintf("RetryStrategy: LinearBackoff(%v)", step)
	}
	return impl{Name: name, Note: note, new: func(c *redis.Client, ttl time.Duration) (locker, error) {
		return &redislockLocker{c: redislock.New(c), ttl: ttl, step: step}, nil
	}}
}

type redislockLocker struct {
	c    *redislock.Client
	ttl  time.Duration
	step time.Duration
}

func (r *redislockLocker) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	var opt *redislock.Options
	if r.step > 0 {
		opt = &redislock.Options{RetryStrategy: redislock.LinearBackoff(r.step)}
	}
	for {
		l, err := r.c.Obtain(ctx, key, r.ttl, opt)
		if err == nil {
			return l.Release, nil
		}
		if ctx.Err() != nil || !errors.Is(err, redislock.ErrNotObtained) {
			return nil, err
		}
	}
}
func (r *redislockLocker) close() error { return nil }

// compareAndDelete is the release every token-safe lock needs.
var compareAndDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// baselineImpl issues the round trips any lease needs and nothing else: SET
// NX PX with a random token, then a compare-and-delete script by EVALSHA.
// While the key is held it sends SET NX again at once (a spinning waiter): the
// upper bound of acquisitions a second, not a sensible way to wait.
func baselineImpl() impl {
	return impl{Name: "baseline", Note: "raw SET NX PX + EVALSHA compare-and-delete; spins on SET NX while held",
		new: func(c *redis.Client, ttl time.Duration) (locker, error) {
			return &baselineLocker{c: c, ttl: ttl}, nil
		}}
}

type baselineLocker struct {
	c   *redis.Client
	ttl time.Duration
	seq atomic.Uint64
}

func (b *baselineLocker) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	token := nextToken(&b.seq)
	for {
		ok, err := b.c.SetNX(ctx, key, token, b.ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) error {
		n, err := compareAndDelete.Run(ctx, b.c, []string{key}, token).Int()
		if err == nil && n != 1 {
			err = errors.New("baseline: not held")
		}
		return err
	}, nil
}
func (b *baselineLocker) close() error { return nil }

// perItemClient hides a *redis.Client behind a type the backend does not
// know, so that it renews each lease with its own renew.lua call, as it did
// before renew_leases.lua: the per-item baseline of renewal cost, measured
// in the same run.
type perItemClient struct{ *redis.Client }

// nextToken is a fresh lock token: seq's next value and the clock, in hex,
// as the peers' 128-bit random tokens are long.
func nextToken(seq *atomic.Uint64) string {
	return fmt.Sprintf("%016x%016x", seq.Add(1), time.Now().UnixNano())
}
