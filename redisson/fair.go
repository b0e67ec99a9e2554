package redisson

import (
	"context"
	"time"
)

// GetFairLock returns name's RFairLock: an RLock (the same hash, field,
// count, renewal and queries) whose waiters queue first come, first
// served, Go and Java alike, in Redisson's queue redisson_lock_queue:{NAME}
// with a timeout each in redisson_lock_timeout:{NAME}. Lock queues when
// the lock is held or another waiter is first, and is woken by a message
// on its own channel, redisson_lock__channel:{NAME}:<field>, which a
// release (Java's or Go's) sends to the first waiter only; a Lock that
// gives up (its context ends) leaves the queue, as Java's acquireFailed
// does. TryLock never queues, and takes a free lock only when nobody is
// queued before it.
//
// A waiter's timeout is in its own host's wall clock: the timeout of the
// waiter before it (or now plus the holder's TTL) plus its wait, which is
// the time left to its context's deadline when Lock starts (as Java's
// tryLock(waitTime)), or WithFairLockWaitTimeout (Java's lock()). Any
// client drops the first waiter once that time has passed in its own
// clock, dead or not: a waiter still alive then queues again at the tail.
// So a skewed clock can reorder or drop waiters; exclusion (the hash)
// does not depend on any client's clock.
func (c *Client) GetFairLock(name string) *Lock { return c.lock(name, fairLock) }

// fairArgs is how a fair Lock attempts: whether it queues, and the wait
// (ms) its timeout is measured with.
type fairArgs struct {
	queue bool
	wait  int64
}

// fairArgs returns the attempt's arguments: a Lock (wait) queues with the
// time its context has left, or the Client's fair wait; a TryLock does not
// queue, and its taking the lock moves the waiters' timeouts by the
// Client's fair wait, as Java's tryLock() does.
func (l *Lock) fairArgs(ctx context.Context, wait bool) fairArgs {
	if l.kind != fairLock {
		return fairArgs{}
	}
	fw := fairArgs{queue: wait, wait: ms(l.c.cfg.fairWait)}
	if d, ok := ctx.Deadline(); ok && wait {
		fw.wait = max(ms(time.Until(d)), 1)
	}
	return fw
}

// tryFair runs one attempt at a fair lock, with now in this host's clock.
func (l *Lock) tryFair(ctx context.Context, field string, fw fairArgs, now time.Time, ttl int64) ([]int64, error) {
	queue := "0"
	if fw.queue {
		queue = "1"
	}
	keys := []string{l.raw, queueKey(l.raw), timeoutKey(l.raw)}
	return fairLockScript.Run(ctx, l.c.c, keys, ttl, field, fw.wait, now.UnixMilli(), queue).Int64Slice()
}

// waitChannel is the channel a waiter of this lock with field listens on.
func (l *Lock) waitChannel(field string) string {
	if l.kind == fairLock {
		return l.Channel() + ":" + field
	}
	return l.Channel()
}

// leave takes a fair waiter that gives up out of the queue (fair_leave.lua),
// under its field's stripe, so as not to race an entry of the same owner.
// Its context is done by now: it runs under the Client's op timeout. A
// leave that fails leaves the place to time out, as a dead waiter's.
func (l *Lock) leave(key holdKey, fw fairArgs) {
	ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.opTimeout)
	defer cancel()
	mu := l.c.stripe(key)
	mu.Lock()
	defer mu.Unlock()
	keys := []string{queueKey(l.raw), timeoutKey(l.raw), l.raw, lockChannel(l.raw)}
	_ = fairLeaveScript.Run(ctx, l.c.c, keys, key.field, fw.wait, l.c.publish).Err()
}

// leaveUnless leaves the queue unless *got: the take got the lock.
func (l *Lock) leaveUnless(got *bool, key holdKey, fw fairArgs) {
	if !*got {
		l.leave(key, fw)
	}
}

// forceFair is ForceUnlock for an RFairLock: the first waiter is told.
func (l *Lock) forceFair(ctx context.Context) (bool, error) {
	keys := []string{l.raw, queueKey(l.raw), timeoutKey(l.raw), lockChannel(l.raw)}
	n, err := fairForceScript.Run(ctx, l.c.c, keys, l.c.publish, time.Now().UnixMilli()).Int64()
	return n == 1, err
}
