-- fair_force.lua: delete a Redisson RFairLock whoever holds it
-- (RedissonFairLock's forceUnlockAsync); prepended with publish.lua and
-- fair_prune.lua.
--
-- KEYS[1]  the lock's hash
-- KEYS[2]  the queue, redisson_lock_queue:{NAME}
-- KEYS[3]  the timeouts, redisson_lock_timeout:{NAME}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{NAME}
-- ARGV[1]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[2]  now, ms since the epoch in the caller's clock (for prune)
--
-- Returns  1 when the hash was deleted: '0' is published to the first
--          waiter, on KEYS[4]:<its field>; 0 when there was no hash.
prune(KEYS[2], KEYS[3], tonumber(ARGV[2]))
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
local first = redis.call('LINDEX', KEYS[2], 0)
if first then
  publish(ARGV[1], KEYS[4] .. ':' .. first, '0')
end
return 1
