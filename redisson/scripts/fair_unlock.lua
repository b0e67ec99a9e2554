-- fair_unlock.lua: leave a Redisson RFairLock once (RedissonFairLock's
-- unlockInnerAsync, 3.24+); prepended with publish.lua and fair_prune.lua.
--
-- KEYS[1]  the lock's hash
-- KEYS[2]  the queue, redisson_lock_queue:{NAME}
-- KEYS[3]  the timeouts, redisson_lock_timeout:{NAME}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{NAME}: the
--          first waiter listens on KEYS[4]:<its field>
-- KEYS[5]  this unlock's latch, redisson_unlock_latch:{NAME}:<request id>
-- ARGV[1]  the TTL the hash keeps while the holder still holds, ms
-- ARGV[2]  the holder's field
-- ARGV[3]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[4]  how long the latch remembers the answer, ms
-- ARGV[5]  now, ms since the epoch in the caller's clock (for prune)
--
-- Returns  1 when the holder's last entry went: the hash is deleted and
--            '0' published to the first waiter (the queue stays: the
--            waiter leaves it when it gets in);
--          0 when the holder still holds (count down by one, the hash
--            lives ARGV[1] ms more);
--          -1 when there was no hash: the first waiter is told all the
--            same, as Redisson does (Redisson answers, and latches, 1:
--            the latch is read by this request alone, and -1 tells
--            tenure that its holder had lost the lock);
--          nil (false) when the hash is held by others only.
local done = redis.call('GET', KEYS[5])
if done then
  return tonumber(done)
end
prune(KEYS[2], KEYS[3], tonumber(ARGV[5]))
local function wakeFirst()
  local first = redis.call('LINDEX', KEYS[2], 0)
  if first then
    publish(ARGV[3], KEYS[4] .. ':' .. first, '0')
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  wakeFirst()
  redis.call('SET', KEYS[5], -1, 'PX', ARGV[4])
  return -1
end
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then
  return false
end
if redis.call('HINCRBY', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[5], 0, 'PX', ARGV[4])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[5], 1, 'PX', ARGV[4])
wakeFirst()
return 1
