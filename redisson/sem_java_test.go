package redisson_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// What a RedissonClient sends for an RPermitExpirableSemaphore
// (RedissonPermitExpirableSemaphore, read from Redisson 3.52.0's source;
// 3.24's scripts below are the same), each script doing what the Java
// method named beside it does. Permit ids travel as their 16 bytes; Java
// shows them as lowercase hex.

// jForever is Redisson's nonExpirableTimeout.
const jForever = 922337203685477

// tryAcquireAsync(ids, timeoutDate): reclaim as many expired permits as
// are asked for, take them if enough are free, else answer ':' and the
// earliest expiry, or nil.
var jSemAcquire = redis.NewScript(`
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local v = redis.call('incrby', KEYS[1], #expired)
  if tonumber(v) > 0 then redis.call(ARGV[5], KEYS[3], v) end
end
local v = redis.call('get', KEYS[1])
if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] ~= nil and first[2] ~= ARGV[4] then
  return ':' .. tostring(first[2])
end
return nil`)

// tryReleaseAsync(permitId).
var jSemRelease = redis.NewScript(`
local expire = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if tonumber(removed) ~= 1 then return 0 end
local v = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], v)
if tonumber(expire) <= tonumber(ARGV[3]) then return 0 end
return 1`)

// availablePermitsAsync.
var jSemAvailable = redis.NewScript(`
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local v = redis.call('incrby', KEYS[1], #expired)
  if tonumber(v) > 0 then redis.call(ARGV[2], KEYS[3], v) end
  return v
end
local ret = redis.call('get', KEYS[1])
return ret == false and 0 or ret`)

// trySetPermitsAsync.
var jSemTrySet = redis.NewScript(`
if redis.call('get', KEYS[1]) == false then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0`)

// addPermitsAsync.
var jSemAdd = redis.NewScript(`
local v = redis.call('get', KEYS[1])
if v == false then v = 0 end
redis.call('set', KEYS[1], tonumber(v) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end`)

// semKeys are a semaphore's free permits, timeouts and channel.
func semKeys(name string) (value, timeouts, channel string) {
	return name, jSuffix(name, "timeout"), jPrefix("redisson_sc", name)
}

// semTry is one tryAcquire(leaseTime) (0: none): the permit's id, or ""
// and the earliest expiry answered (-1: none).
func (j *javaClient) semTry(ctx context.Context, name string, leaseTime time.Duration) (string, int64, error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	now := time.Now().UnixMilli()
	expiry := int64(jForever)
	if leaseTime > 0 {
		expiry = now + leaseTime.Milliseconds()
	}
	v, t, ch := semKeys(name)
	r, err := jSemAcquire.Run(ctx, j.c, []string{v, t, ch}, 1, expiry, now, jForever, j.publish, id[:]).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return "", -1, nil
	case err != nil:
		return "", 0, err
	case r == "OK":
		return hex.EncodeToString(id[:]), 0, nil
	}
	at, err := strconv.ParseInt(r[1:], 10, 64)
	return "", at, err
}

// semRelease is tryRelease(permitId).
func (j *javaClient) semRelease(ctx context.Context, name, id string) (bool, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return false, err
	}
	v, t, ch := semKeys(name)
	n, err := jSemRelease.Run(ctx, j.c, []string{v, ch, t}, raw, 1, time.Now().UnixMilli(), j.publish).Int64()
	return n == 1, err
}

// semAvailable is availablePermits().
func (j *javaClient) semAvailable(ctx context.Context, name string) (int64, error) {
	v, t, ch := semKeys(name)
	return jSemAvailable.Run(ctx, j.c, []string{v, t, ch}, time.Now().UnixMilli(), j.publish).Int64()
}

// semTrySet is trySetPermits(n).
func (j *javaClient) semTrySet(ctx context.Context, name string, n int) (bool, error) {
	v, _, ch := semKeys(name)
	r, err := jSemTrySet.Run(ctx, j.c, []string{v, ch}, n, j.publish).Int64()
	return r == 1, err
}

// semAdd is addPermits(n).
func (j *javaClient) semAdd(ctx context.Context, name string, n int) error {
	v, _, ch := semKeys(name)
	err := jSemAdd.Run(ctx, j.c, []string{v, ch}, n, j.publish).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// semAcquire is acquire(leaseTime) as Redisson runs it: try, subscribe,
// then try again on each message (a number of permits) or when the
// earliest expiry answered has passed; a nil answer waits for a message
// alone. byMessage counts the tries a message caused.
func (j *javaClient) semAcquire(ctx context.Context, t *testing.T, name string, leaseTime time.Duration) (id string, byMessage int, err error) {
	if id, _, err = j.semTry(ctx, name, leaseTime); err != nil || id != "" {
		return id, 0, err
	}
	_, _, ch := semKeys(name)
	w := j.subscribe(ctx, t, ch)
	defer w.close()
	for {
		id, at, err := j.semTry(ctx, name, leaseTime)
		if err != nil || id != "" {
			return id, byMessage, err
		}
		wait := time.Hour
		if at >= 0 {
			wait = max(time.Until(time.UnixMilli(at)), 0)
		}
		timer := time.NewTimer(wait)
		select {
		case m := <-w.msgs:
			if _, err := strconv.Atoi(m.Payload); err != nil {
				timer.Stop()
				return "", byMessage, errors.New("java waiter: unexpected message " + m.Payload)
			}
			byMessage++
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return "", byMessage, ctx.Err()
		}
		timer.Stop()
	}
}
