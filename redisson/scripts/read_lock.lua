-- read_lock.lua: take or re-enter the read half of a Redisson
-- RReadWriteLock (RedissonReadLock's tryLockInnerAsync).
--
-- The lock is one hash: 'mode' is 'read' or 'write', each reader's field
-- <client id>:<thread id> counts its entries, and a writer's field ends in
-- ':write'. Every read entry i of a reader also has a key of its own,
-- {NAME}:<field>:rwlock_timeout:<i>, living as long as that entry would:
-- a reader's unlock gives the hash the longest life left among them.
--
-- KEYS[1]  the lock's hash
-- KEYS[2]  the reader's timeout prefix, {NAME}:<field>:rwlock_timeout
--          ({NAME} is NAME itself when NAME holds a '{' already)
-- ARGV[1]  the entry's TTL, milliseconds
-- ARGV[2]  the reader's field
-- ARGV[3]  the same holder's write field (<field>:write): a writer may read
--
-- Returns  {-1, -1, count} when the read entry was taken, the reader's
--          count now being count: its timeout key lives ARGV[1] ms, and the
--          hash at least as long (never shorter than it was); otherwise
--          {pttl, -1, 0}, pttl the hash's (a writer of another holder has
--          it). Redisson's answers nil or the PTTL.
local mode = redis.call('HGET', KEYS[1], 'mode')
if mode == false then
  redis.call('HSET', KEYS[1], 'mode', 'read')
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('SET', KEYS[2] .. ':1', 1, 'PX', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {-1, -1, 1}
end
if mode == 'read' or (mode == 'write' and redis.call('HEXISTS', KEYS[1], ARGV[3]) == 1) then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  redis.call('SET', KEYS[2] .. ':' .. n, 1, 'PX', ARGV[1])
  local left = redis.call('PTTL', KEYS[1])
  if left < tonumber(ARGV[1]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
  end
  return {-1, -1, n}
end
return {redis.call('PTTL', KEYS[1]), -1, 0}
