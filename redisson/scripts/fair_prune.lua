-- fair_prune.lua: prepended to every script of package redisson's RFairLock
-- (after publish.lua where that is prepended too); it defines prune() and
-- runs nothing.
--
-- An RFairLock's waiters queue in a list, redisson_lock_queue:{NAME}
-- (fields, first come first), and each has a timeout in a sorted set,
-- redisson_lock_timeout:{NAME}: a time in ms of the wall clock of the
-- client that queued it, past which it is presumed dead. Every script of
-- Redisson's RedissonFairLock but acquireFailed first drops the waiters at
-- the head of the queue whose timeout has passed in the caller's clock
-- (and only those: a waiter behind a live one stays, whatever its time).

-- prune drops the head of queue while its timeout (in timeouts) is at or
-- before now; a head with no timeout stops it, as in Redisson 3.32+.
local function prune(queue, timeouts, now)
  while true do
    local first = redis.call('LINDEX', queue, 0)
    if not first then
      return
    end
    local t = redis.call('ZSCORE', timeouts, first)
    if not t or tonumber(t) > now then
      return
    end
    redis.call('ZREM', timeouts, first)
    redis.call('LPOP', queue)
  end
end
