-- available.lua: how many permits of a semaphore are free, read alone: it
-- writes nothing, takes nothing and joins no queue.
--
-- KEYS[1]  the semaphore, P{N}: a sorted set of permit -> expiry (ms), as
--          permit.lua keeps it
-- KEYS[2]  each permit's fence and the stored N, P{N}:permits
-- ARGV[1]  the caller's N, >= 1
--
-- Returns  {free, n}: n is the N that a request would be judged by (the
--          stored N while permits are held, else ARGV[1]), and free is n
--          minus the live permits (those whose score is ahead of the
--          server's clock; a hold of k permits counts k), never below 0.
--          A name held by a lease or a reentrant lock has {0, ARGV[1]}.
--          Fair waiters are not subtracted: free permits may be promised to
--          the queue.
local n = tonumber(ARGV[1])
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return {n, n}
elseif kind ~= 'zset' then
  return {0, n}
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local held = redis.call('ZCOUNT', KEYS[1], '(' .. now_ms, '+inf')
if held > 0 then
  n = tonumber(redis.call('HGET', KEYS[2], 'n')) or n
end
return {math.max(0, n - held), n}
