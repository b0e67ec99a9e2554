-- leave.lua: a fair waiter gives up its place in the queue.
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  the fair queue, P{N}:queue
-- KEYS[3]  the queue's expiries, P{N}:queue:expiry
-- ARGV[1]  the waiter's token
-- ARGV[2]  the name's release channel, P{N}:released
-- ARGV[3]  for a fair request of k permits: k (its k members of the
--          queue, permit.lua's ARGV[6]); absent for 1
--
-- Returns  1 when the waiters were told, on ARGV[2], that they may get in:
--            the waiter was in the queue, and the name is free or held by
--            permits. Every waiter behind it moves up, and barging requests
--            (which wait while anyone is queued) may go once the queue is
--            empty: a writer of a read-write lock that gives up lets the
--            readers it held back in. wake() is letgo.lua's, prepended;
--          0 otherwise.
local rank = redis.call('ZRANK', KEYS[2], ARGV[1])
local k = tonumber(ARGV[3] or '1')
zrem_permit(KEYS[2], ARGV[1], k)
zrem_permit(KEYS[3], ARGV[1], k)
if rank then
  return wake(KEYS[1], ARGV[2])
end
return 0
