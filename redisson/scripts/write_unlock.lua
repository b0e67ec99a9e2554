-- write_unlock.lua: leave the write half of a Redisson RReadWriteLock
-- once (RedissonWriteLock's unlockInnerAsync); prepended with publish.lua.
--
-- KEYS[1]  the lock's hash
-- KEYS[2]  its channel, redisson_rwlock:{NAME}
-- KEYS[3]  this unlock's latch, redisson_unlock_latch:{NAME}:<request id>
-- ARGV[1]  the TTL the hash keeps while the writer still holds, ms
-- ARGV[2]  the writer's field, <client id>:<thread id>:write
-- ARGV[3]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[4]  how long the latch remembers the answer, ms
--
-- Returns  1 when the writer's last entry went: with nothing else in the
--            hash it is deleted and '1' (READ_UNLOCK_MESSAGE: every waiter
--            looks) published; with the writer's own read entries left the
--            mode becomes 'read' and nobody is told, as in Redisson;
--          0 when the writer still holds (count down by one);
--          nil (false) when ARGV[2] does not hold the write lock.
local done = redis.call('GET', KEYS[3])
if done then
  return tonumber(done)
end
local mode = redis.call('HGET', KEYS[1], 'mode')
if mode == false then
  publish(ARGV[3], KEYS[2], '1')
  redis.call('SET', KEYS[3], 1, 'PX', ARGV[4])
  return false
end
if mode ~= 'write' or redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then
  return false
end
if redis.call('HINCRBY', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[3], 0, 'PX', ARGV[4])
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[2])
if redis.call('HLEN', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[1])
  publish(ARGV[3], KEYS[2], '1')
else
  redis.call('HSET', KEYS[1], 'mode', 'read')
end
redis.call('SET', KEYS[3], 1, 'PX', ARGV[4])
return 1
