package redisson_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// RedissonFairLock.tryLockInnerAsync (its EVAL_LONG flavour, 3.24+): a
// waiter that cannot take the lock queues in KEYS[2] with a timeout in
// KEYS[3], in its own clock (ARGV[4]).
var jFairLock = redis.NewScript(`
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local t = redis.call('zscore', KEYS[3], first)
  if t ~= false and tonumber(t) <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else
    break
  end
end
if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, k in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), k)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl`)

// TestRLockIsNoFairLock backs what docs/design.md section 13 says of a Go
// RLock on a name Java takes as an RFairLock: it excludes Java's fair
// holders (one hash), but jumps their queue, and its release is published
// on the RLock's channel only, never on a fair waiter's own.
func TestRLockIsNoFairLock(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	cl := newClient(t, c)
	j := newJava(c, 30*time.Second)
	ctx := bounded(t, 20*time.Second)
	const name = "fair"
	fairTry := func(thread int64) (bool, error) {
		keys := []string{name, "redisson_lock_queue:{fair}", "redisson_lock_timeout:{fair}"}
		_, err := jFairLock.Run(ctx, c, keys, j.ttl.Milliseconds(), j.field(thread), 300000, time.Now().UnixMilli()).Int64()
		if errors.Is(err, redis.Nil) {
			return true, nil
		}
		return false, err
	}
	h, err := cl.GetLock(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := fairTry(1); ok || err != nil {
		t.Fatalf("a Java fair waiter took a lock Go holds: %v %v", ok, err)
	}
	if q := c.LRange(ctx, "redisson_lock_queue:{fair}", 0, -1).Val(); len(q) != 1 || q[0] != j.field(1) {
		t.Fatalf("queue %v", q)
	}
	mon := srv.Monitor(t)
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var published []string
	for _, cmd := range mon.Stop(t) {
		if len(cmd.Args) > 1 && strings.Contains(strings.ToUpper(cmd.Args[0]), "PUBLISH") {
			published = append(published, cmd.Args[1])
		}
	}
	if len(published) != 1 || published[0] != "redisson_lock__channel:{fair}" {
		t.Fatalf("published on %v; a fair waiter listens on redisson_lock__channel:{fair}:%s", published, j.field(1))
	}
	// The lock is free and a Java fair waiter is first in the queue: a Go
	// RLock takes it all the same.
	h, err = cl.GetLock(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("Go did not jump the fair queue: %v", err)
	}
	_ = h.Unlock(ctx)
}
