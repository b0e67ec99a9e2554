-- queue.lua: the fair queue's bookkeeping, shared by acquire.lua and
-- permit.lua (internal/backend prepends this file to each of them; it
-- defines functions and runs nothing). The queue is two sorted sets: the
-- waiting tokens by arrival (server us), and when each is forgotten
-- (server ms) unless it asks again.

-- forget_gone drops the waiters of queue whose time in expiry has come
-- (they died, or gave up without saying so), a bounded number per call.
local function forget_gone(queue, expiry, now_ms)
  local gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', now_ms, 'LIMIT', 0, 100)
  if #gone > 0 then
    redis.call('ZREM', expiry, unpack(gone))
    redis.call('ZREM', queue, unpack(gone))
  end
end

-- join puts token in queue (keeping its first arrival if it is there
-- already) and sets when it is forgotten, patience ms from now; the queue
-- outlives its longest-lived waiter, and no more. It returns the token's
-- arrival.
local function join(queue, expiry, token, now_us, now_ms, patience)
  if not redis.call('ZSCORE', queue, token) then
    redis.call('ZADD', queue, now_us, token)
  end
  redis.call('ZADD', expiry, now_ms + patience, token)
  if redis.call('PTTL', queue) < patience then
    redis.call('PEXPIRE', queue, patience)
    redis.call('PEXPIRE', expiry, patience)
  end
  return tonumber(redis.call('ZSCORE', queue, token))
end
