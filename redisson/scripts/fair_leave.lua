-- fair_leave.lua: take a fair waiter that gives up out of an RFairLock's
-- queue (RedissonFairLock's acquireFailedAsync); prepended with
-- publish.lua.
--
-- Every waiter behind it has its timeout moved ARGV[2] earlier (one slot
-- fewer ahead of it); the waiter leaves the list and the sorted set.
-- Unlike Redisson's, it also passes a wake on: when the waiter was first
-- and the hash is free, a release may have been published to it alone,
-- so '0' goes to the new first waiter, which would otherwise look again
-- only when its own wait ran out. That message is the one difference from
-- Redisson's effects, and one a Java waiter reads as "look again".
--
-- KEYS[1]  the queue, redisson_lock_queue:{NAME}
-- KEYS[2]  the timeouts, redisson_lock_timeout:{NAME}
-- KEYS[3]  the lock's hash
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{NAME}
-- ARGV[1]  the waiter's field
-- ARGV[2]  the waiter's wait, ms (as it queued with)
-- ARGV[3]  'PUBLISH' or 'SPUBLISH' (publish.lua)
--
-- Returns  1 when the waiter was in the queue, 0 when not.
local queue = redis.call('LRANGE', KEYS[1], 0, -1)
local at = 1
while at <= #queue and queue[at] ~= ARGV[1] do
  at = at + 1
end
for i = at + 1, #queue do
  redis.call('ZINCRBY', KEYS[2], -tonumber(ARGV[2]), queue[i])
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('LREM', KEYS[1], 0, ARGV[1])
if at > #queue then
  return 0
end
if at == 1 and #queue > 1 and redis.call('EXISTS', KEYS[3]) == 0 then
  publish(ARGV[3], KEYS[4] .. ':' .. queue[2], '0')
end
return 1
