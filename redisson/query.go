package redisson

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The queries Redisson's RLock offers beside taking and releasing
// (isLocked, getHoldCount, isHeldByThread, remainTimeToLive), for any
// holder, Go or Java. Each is one plain command (EXISTS, HGET, HEXISTS,
// PTTL) and sees the lock as Redis has it now: a Java holder's lock, or a
// Go holder's whose Hold has not noticed a loss yet.

// IsLocked reports whether anyone holds the lock (RLock.isLocked): for a
// read lock, whether readers hold the name; for a write lock, whether a
// writer does.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	switch l.kind {
	case readLock, writeLock:
		mode, err := l.c.c.HGet(ctx, l.raw, "mode").Result()
		if errors.Is(err, redis.Nil) {
			return false, nil
		}
		want := "read"
		if l.kind == writeLock {
			want = "write"
		}
		return err == nil && mode == want, err
	}
	n, err := l.c.c.Exists(ctx, l.raw).Result()
	return n > 0, err
}

// HoldCount is how many times the owner that ctx carries (WithOwner) has
// entered the lock and not yet left it (RLock.getHoldCount): 0 when it does
// not hold the lock, or ctx carries no owner. An owner without a client id
// is this Client's.
func (l *Lock) HoldCount(ctx context.Context) (int64, error) {
	field, ok := l.ownerField(ctx)
	if !ok || l.err != nil {
		return 0, l.err
	}
	n, err := l.c.c.HGet(ctx, l.raw, field).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// IsHeldByOwner reports whether the owner that ctx carries holds the lock
// (RLock.isHeldByThread); false when ctx carries no owner.
func (l *Lock) IsHeldByOwner(ctx context.Context) (bool, error) {
	field, ok := l.ownerField(ctx)
	if !ok || l.err != nil {
		return false, l.err
	}
	return l.c.c.HExists(ctx, l.raw, field).Result()
}

// RemainingTTL is how long the lock's hash lives on if nobody renews it
// (RLock.remainTimeToLive): 0 when nobody holds it, and a negative
// duration (-1ns) for a hash without a TTL, which Redisson never leaves.
func (l *Lock) RemainingTTL(ctx context.Context) (time.Duration, error) {
	if l.err != nil {
		return 0, l.err
	}
	ms, err := l.c.c.Do(ctx, "PTTL", l.raw).Int64()
	switch {
	case err != nil:
		return 0, err
	case ms == -2:
		return 0, nil
	case ms < 0:
		return -1, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ownerField is the hash field of the owner ctx carries, for this lock's
// kind; false when ctx carries none.
func (l *Lock) ownerField(ctx context.Context) (string, bool) {
	owner, ok := OwnerFrom(ctx)
	if !ok {
		return "", false
	}
	if owner.ClientID == "" {
		owner.ClientID = l.c.id
	}
	field := owner.Field()
	if l.kind == writeLock {
		field += ":write"
	}
	return field, true
}
