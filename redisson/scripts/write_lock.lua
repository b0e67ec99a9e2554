-- write_lock.lua: take or re-enter the write half of a Redisson
-- RReadWriteLock (RedissonWriteLock's tryLockInnerAsync). See
-- read_lock.lua for the hash.
--
-- KEYS[1]  the lock's hash
-- ARGV[1]  the TTL, milliseconds
-- ARGV[2]  the writer's field, <client id>:<thread id>:write
--
-- Returns  {-1, -1, count} when the write entry was taken, the writer's
--          count now being count: on a free lock the hash lives ARGV[1] ms;
--          a re-entry adds ARGV[1] ms to what the hash had left, as
--          Redisson's does; otherwise {pttl, -1, 0}. Redisson's answers nil
--          or the PTTL.
local mode = redis.call('HGET', KEYS[1], 'mode')
if mode == false then
  redis.call('HSET', KEYS[1], 'mode', 'write')
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {-1, -1, 1}
end
if mode == 'write' and redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  local left = redis.call('PTTL', KEYS[1])
  redis.call('PEXPIRE', KEYS[1], left + tonumber(ARGV[1]))
  return {-1, -1, n}
end
return {redis.call('PTTL', KEYS[1]), -1, 0}
