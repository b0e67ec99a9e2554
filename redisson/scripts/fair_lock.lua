-- fair_lock.lua: take or re-enter a Redisson RFairLock, queueing when it
-- cannot (RedissonFairLock's tryLockInnerAsync: its EVAL_LONG flavour with
-- ARGV[5] '1', its EVAL_NULL_BOOLEAN flavour, which never queues, with
-- '0'); prepended with fair_prune.lua.
--
-- The hash is an RLock's. It is taken only when it is free and the queue
-- is empty or has ARGV[2] first; then every waiter still queued has its
-- timeout moved ARGV[3] earlier (the one ahead of them got in). A waiter
-- queues at the tail with the timeout of the waiter before it (or, with
-- none, now + the hash's PTTL) plus ARGV[3]; one queued already keeps its
-- place and time.
--
-- KEYS[1]  the lock's hash, the (mapped) name
-- KEYS[2]  the queue, redisson_lock_queue:{NAME}
-- KEYS[3]  the timeouts, redisson_lock_timeout:{NAME}
-- ARGV[1]  the hash's TTL, ms
-- ARGV[2]  the caller's field, <client id>:<thread id>
-- ARGV[3]  the caller's wait, ms (Redisson's threadWaitTime, or the
--          waitTime its tryLock was given)
-- ARGV[4]  now, ms since the epoch in the caller's clock
-- ARGV[5]  '1' to queue when not taken, '0' not to
--
-- Returns  {-1, -1, count} when ARGV[2] holds the lock, its count now
--          count; else {wait, -1, 0}: when to look again at the latest,
--          ms: the hash's PTTL (-1 for none) while it is held, and while it
--          is free with another waiter first, the time left to that
--          waiter's timeout (at least 1; -1 if it has none). (Redisson's
--          answers nil or a wait of its own: the effects are the same.)
local wait, now = tonumber(ARGV[3]), tonumber(ARGV[4])
prune(KEYS[2], KEYS[3], now)
if redis.call('EXISTS', KEYS[1]) == 0 then
  local first = redis.call('LINDEX', KEYS[2], 0)
  if not first or first == ARGV[2] then
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], ARGV[2])
    for _, waiter in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
      redis.call('ZINCRBY', KEYS[3], -wait, waiter)
    end
    redis.call('HSET', KEYS[1], ARGV[2], 1)
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
    return {-1, -1, 1}
  end
end
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {-1, -1, n}
end
if ARGV[5] == '1' and not redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  local last = redis.call('LINDEX', KEYS[2], -1)
  local before = last and last ~= ARGV[2] and redis.call('ZSCORE', KEYS[3], last)
  local ahead
  if before then
    ahead = tonumber(before) - now
  else
    ahead = redis.call('PTTL', KEYS[1])
  end
  if redis.call('ZADD', KEYS[3], ahead + wait + now, ARGV[2]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[2])
  end
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl ~= -2 then
  return {pttl, -1, 0}
end
local first = redis.call('LINDEX', KEYS[2], 0)
local t = first and redis.call('ZSCORE', KEYS[3], first)
if not t then
  return {-1, -1, 0}
end
return {math.max(1, tonumber(t) - now), -1, 0}
