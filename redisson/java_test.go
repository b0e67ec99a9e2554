package redisson_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// javaClient stands in for a RedissonClient, since Redisson cannot run
// here: it sends the commands Redisson 3.24 and later sends for RLock,
// RFencedLock and RReadWriteLock, with the same keys, arguments and
// replies, each script below doing what the Java method named beside it
// does (read from Redisson 3.52.0's source; 3.24's scripts do the same but
// for the renewal, per lock before 3.44, batched since). A Java "thread" is
// an int64, the field <uuid>:<thread>.
type javaClient struct {
	c       redis.UniversalClient
	id      string        // the RedissonClient's UUID
	ttl     time.Duration // lockWatchdogTimeout
	publish string        // getPublishCommand(): SPUBLISH on a sharded Cluster
	sharded bool          // listens with SSUBSCRIBE
}

func newJava(c redis.UniversalClient, ttl time.Duration) *javaClient {
	j := &javaClient{c: c, id: uuid(), ttl: ttl, publish: "PUBLISH"}
	if _, ok := c.(*redis.ClusterClient); ok {
		// ShardedSubscriptionMode AUTO on a Redis 7 Cluster.
		j.publish, j.sharded = "SPUBLISH", true
	}
	return j
}

func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (j *javaClient) field(thread int64) string { return fmt.Sprintf("%s:%d", j.id, thread) }

// Redisson's names (RedissonObject.prefixName, suffixName).
func jPrefix(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

func jSuffix(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// RedissonLock.tryLockInnerAsync: nil when taken, else the PTTL.
var jLock = redis.NewScript(`
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`)

// RedissonFencedLock.tryLockInnerAsync (the token flavour): {-1, token}
// when taken, else {pttl, -1}.
var jFencedLock = redis.NewScript(`
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}`)

// RedissonLock.unlockInnerAsync (3.24+, with the unlock latch): nil when
// not held, 0 still held, 1 released.
var jUnlock = redis.NewScript(`
local latched = redis.call('get', KEYS[3])
if latched ~= false then
  return tonumber(latched)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1`)

// LockTask.renew (3.44+, batched; one lock here): 1 per renewed key.
var jRenew = redis.NewScript(`
local out = {}
for i = 1, #KEYS do
  if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    table.insert(out, 1)
  else
    table.insert(out, 0)
  end
end
return out`)

// RedissonReadLock.tryLockInnerAsync.
var jReadLock = redis.NewScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local k = KEYS[2] .. ':' .. n
  redis.call('set', k, 1)
  redis.call('pexpire', k, ARGV[1])
  local left = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(left, ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1])`)

// RedissonReadLock.unlockInnerAsync (3.24+).
var jReadUnlock = redis.NewScript(`
local latched = redis.call('get', KEYS[5])
if latched ~= false then
  return tonumber(latched)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  redis.call('set', KEYS[5], 1, 'px', ARGV[4])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if n == 0 then
  redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (n + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local most = -3
  for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
    local c = tonumber(redis.call('hget', KEYS[1], f))
    if type(c) == 'number' then
      for i = c, 1, -1 do
        most = math.max(redis.call('pttl', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i), most)
      end
    end
  end
  if most > 0 then
    redis.call('pexpire', KEYS[1], most)
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1`)

// ReadLockTask.renew (3.44+; one lock here, so its inner loop's KEYS
// index is right).
var jReadRenew = redis.NewScript(`
local c = redis.call('hget', KEYS[1], ARGV[2])
if c == false then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) > 1 then
  for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
    local n = tonumber(redis.call('hget', KEYS[1], f))
    if type(n) == 'number' then
      for i = n, 1, -1 do
        redis.call('pexpire', KEYS[2] .. ':' .. f .. ':rwlock_timeout:' .. i, ARGV[1])
      end
    end
  end
end
return 1`)

// RedissonWriteLock.tryLockInnerAsync.
var jWriteLock = redis.NewScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local left = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], left + ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`)

// RedissonWriteLock.unlockInnerAsync (3.24+).
var jWriteUnlock = redis.NewScript(`
local latched = redis.call('get', KEYS[3])
if latched ~= false then
  return tonumber(latched)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return nil
end
if mode == 'write' then
  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
  end
  local n = redis.call('hincrby', KEYS[1], ARGV[3], -1)
  if n > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
  end
  redis.call('hdel', KEYS[1], ARGV[3])
  if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
  else
    redis.call('hset', KEYS[1], 'mode', 'read')
  end
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return 1
end
return nil`)

// latchTimeout is what Redisson passes as the latch's life with its
// default timeout (3s), retry delay and 3 attempts, rounded.
const latchTimeout = 13500

// tryLock is RLock.tryLock() for thread: it reports whether it took the
// lock, and the holder's PTTL when it did not.
func (j *javaClient) tryLock(ctx context.Context, name string, thread int64) (bool, int64, error) {
	v, err := jLock.Run(ctx, j.c, []string{name}, j.ttl.Milliseconds(), j.field(thread)).Int64()
	if errors.Is(err, redis.Nil) {
		return true, 0, nil
	}
	return false, v, err
}

// tryFenced is RFencedLock.tryLockAndGetToken(): the token, or 0 when not
// taken.
func (j *javaClient) tryFenced(ctx context.Context, name string, thread int64) (int64, error) {
	v, err := jFencedLock.Run(ctx, j.c, []string{name, jPrefix("redisson_lock_token", name)}, j.ttl.Milliseconds(), j.field(thread)).Int64Slice()
	if err != nil || v[0] != -1 {
		return 0, err
	}
	return v[1], nil
}

// unlock is RLock.unlock(): nil reply is Java's IllegalMonitorStateException.
func (j *javaClient) unlock(ctx context.Context, name string, thread int64) (int64, error) {
	keys := []string{name, jPrefix("redisson_lock__channel", name), jPrefix("redisson_unlock_latch", name) + ":" + uuid()}
	return jUnlock.Run(ctx, j.c, keys, "0", j.ttl.Milliseconds(), j.field(thread), j.publish, latchTimeout).Int64()
}

// renew is one round of the watchdog for thread's RLock.
func (j *javaClient) renew(ctx context.Context, name string, thread int64) (bool, error) {
	v, err := jRenew.Run(ctx, j.c, []string{name}, j.ttl.Milliseconds(), j.field(thread)).Int64Slice()
	return err == nil && v[0] == 1, err
}

func (j *javaClient) readTimeouts(name string, thread int64) string {
	return jSuffix(name, j.field(thread)) + ":rwlock_timeout"
}

func (j *javaClient) tryRead(ctx context.Context, name string, thread int64) (bool, int64, error) {
	keys := []string{name, j.readTimeouts(name, thread)}
	v, err := jReadLock.Run(ctx, j.c, keys, j.ttl.Milliseconds(), j.field(thread), j.field(thread)+":write").Int64()
	if errors.Is(err, redis.Nil) {
		return true, 0, nil
	}
	return false, v, err
}

func (j *javaClient) readUnlock(ctx context.Context, name string, thread int64) (int64, error) {
	prefix := j.readTimeouts(name, thread)
	keyPrefix, _, _ := strings.Cut(prefix, ":"+j.field(thread))
	keys := []string{name, jPrefix("redisson_rwlock", name), prefix, keyPrefix, jPrefix("redisson_unlock_latch", name) + ":" + uuid()}
	return jReadUnlock.Run(ctx, j.c, keys, "0", j.field(thread), j.publish, latchTimeout).Int64()
}

func (j *javaClient) readRenew(ctx context.Context, name string, thread int64) (bool, error) {
	prefix := j.readTimeouts(name, thread)
	keyPrefix, _, _ := strings.Cut(prefix, ":"+j.field(thread))
	v, err := jReadRenew.Run(ctx, j.c, []string{name, keyPrefix}, j.ttl.Milliseconds(), j.field(thread)).Int64()
	return v == 1, err
}

func (j *javaClient) tryWrite(ctx context.Context, name string, thread int64) (bool, int64, error) {
	v, err := jWriteLock.Run(ctx, j.c, []string{name}, j.ttl.Milliseconds(), j.field(thread)+":write").Int64()
	if errors.Is(err, redis.Nil) {
		return true, 0, nil
	}
	return false, v, err
}

func (j *javaClient) writeUnlock(ctx context.Context, name string, thread int64) (int64, error) {
	keys := []string{name, jPrefix("redisson_rwlock", name), jPrefix("redisson_unlock_latch", name) + ":" + uuid()}
	return jWriteUnlock.Run(ctx, j.c, keys, "1", j.ttl.Milliseconds(), j.field(thread)+":write", j.publish, latchTimeout).Int64()
}

// jWaiter is a Java waiter's subscription (LockPubSub): it listens with
// the one kind of pub/sub its client uses.
type jWaiter struct {
	ps   *redis.PubSub
	msgs <-chan *redis.Message
}

func (j *javaClient) subscribe(ctx context.Context, t *testing.T, channel string) *jWaiter {
	t.Helper()
	var ps *redis.PubSub
	if j.sharded {
		ps = j.c.SSubscribe(ctx, channel)
	} else {
		ps = j.c.Subscribe(ctx, channel)
	}
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	return &jWaiter{ps: ps, msgs: ps.Channel()}
}

func (w *jWaiter) close() { _ = w.ps.Close() }

// lock is RLock.lock() as RedissonLock runs it: try, subscribe, then try
// again on each message, or when the holder's TTL has run out. It never
// polls: only a message or the TTL wakes it. byMessage counts the tries a
// message caused.
func (j *javaClient) lock(ctx context.Context, t *testing.T, name string, thread int64, try func() (bool, int64, error), channel string) (byMessage int, err error) {
	ok, _, err := try()
	if err != nil || ok {
		return 0, err
	}
	w := j.subscribe(ctx, t, channel)
	defer w.close()
	for {
		ok, pttl, err := try()
		if err != nil || ok {
			return byMessage, err
		}
		wait := time.Duration(pttl) * time.Millisecond
		if pttl < 0 {
			wait = time.Hour
		}
		timer := time.NewTimer(wait)
		select {
		case m := <-w.msgs:
			if m.Payload != "0" && m.Payload != "1" {
				return byMessage, fmt.Errorf("java waiter: unexpected message %q", m.Payload)
			}
			byMessage++
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return byMessage, ctx.Err()
		}
		timer.Stop()
	}
}
