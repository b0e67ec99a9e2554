-- unlock.lua: leave a Redisson RLock or RFencedLock once
-- (RedissonLock's unlockInnerAsync); prepended with publish.lua.
--
-- KEYS[1]  the lock's hash
-- KEYS[2]  its channel, redisson_lock__channel:{NAME}
-- KEYS[3]  this unlock's latch, redisson_unlock_latch:{NAME}:<request id>
-- ARGV[1]  the TTL the hash keeps while the holder still holds, ms
-- ARGV[2]  the holder's field
-- ARGV[3]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[4]  how long the latch remembers the answer, ms
--
-- Returns  1 when the holder's last entry went: the hash is deleted and
--          '0' (Redisson's UNLOCK_MESSAGE) is published on KEYS[2];
--          0 when the holder still holds (its count went down by one, the
--          hash lives ARGV[1] ms more);
--          nil (false) when ARGV[2] does not hold the lock.
-- The latch makes a resent unlock harmless, as Redisson 3.24+ makes its
-- own: a copy of a request whose reply was lost finds the latch and gets
-- the first answer instead of taking a second entry back.
local done = redis.call('GET', KEYS[3])
if done then
  return tonumber(done)
end
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then
  return false
end
if redis.call('HINCRBY', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[3], 0, 'PX', ARGV[4])
  return 0
end
redis.call('DEL', KEYS[1])
publish(ARGV[3], KEYS[2], '0')
redis.call('SET', KEYS[3], 1, 'PX', ARGV[4])
return 1
