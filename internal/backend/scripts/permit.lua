-- permit.lua: take k permits of a semaphore (at most ARGV[3] permits of
-- the name held at once), all or none, and hand out one fencing token. A semaphore holds the
-- name's key as a sorted set of permit tokens scored by when each expires
-- (server time in ms), so a dead holder's permit frees itself: a permit
-- past its score is counted free and removed here. The key is the one a
-- lease of the name would use (one name is one lock, whatever kind holds
-- it): a lease or a reentrant lock of the name and its permits exclude each
-- other.
--
-- KEYS[1]  the semaphore, P{N}: a sorted set of token -> expiry (ms)
-- KEYS[2]  the fencing counter, P{N}:fence (as acquire.lua's)
-- KEYS[3]  the marker abandon.lua leaves for this request, P{N}:retired:<token>
-- KEYS[4]  the fair queue, P{N}:queue (as acquire.lua's)
-- KEYS[5]  the queue's expiries, P{N}:queue:expiry (as acquire.lua's)
-- KEYS[6]  each permit's fence, P{N}:permits: a hash of token -> fence, so
--          that a resent request is answered with the fence it was given,
--          and the reserved field 'n': the semaphore's N, which lives and
--          dies with the permits (letgo.lua's settle())
-- ARGV[1]  the request's random token: the permit's, when granted
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  the number of permits, N >= 1: this request's N. The N of the
--          request that took the first permit stands while any permit is
--          held (it is stored in KEYS[6]'s field 'n'); a request with
--          another N is refused at once, unless ARGV[5] resizes. Once no
--          permit is held, the next request granted one stores its own N
-- ARGV[4]  fair mode: how long, in milliseconds, the queue keeps this token
--          without another attempt; '0' for a barging request, which joins
--          no queue but waits while anyone waits in it (as acquire.lua's)
-- ARGV[5]  '1' to resize: while permits are held under another N, store
--          ARGV[3] as the N (held permits stay; new ones are granted only
--          while fewer than the new N are held); '0' otherwise
-- ARGV[6]  k, how many permits the request takes at once, 1 <= k <= N;
--          absent for 1. A hold of k permits is k members of the set,
--          ARGV[1] and ARGV[1]#2 ... ARGV[1]#k, with one score (so every
--          count of the set counts permits, not holders), and only ARGV[1]
--          has a fence in KEYS[6]. A fair request of k waits as k members
--          of the queue likewise (one arrival), so those behind it leave it
--          room: a request is granted while held + (members ahead) + k <= N
--
-- Returns  fence, an integer, when the token now holds its k permits (also when
--                    it already did: a client library's resent request
--                    gets the first answer);
--          {0, wait, arrival, free} when no permit is free for this
--                    request: wait is how long, in milliseconds, before one
--                    could be free even if nobody lets go (the earliest
--                    permit's expiry, or the queue head's when permits are
--                    free but promised to the queue), -1 when never; arrival
--                    is a fair request's place in the queue (server time in
--                    us), 0 for a barging one; free is how many of the N
--                    permits are free (N minus the live ones: the caller's
--                    error says it beside its k), -1 when another kind of
--                    holder has the name;
--          {0, -2}   when its sender already gave this request up
--                    (abandon.lua ran): nothing is touched;
--          {0, -3, n} when permits are held under another N, n, and the
--                    request does not resize: it is refused at once, and
--                    neither joins the queue nor waits.
-- Fences are made as acquire.lua makes them: max(counter + 1, server TIME
-- in us), so that they increase across every permit, lease and reentrant
-- lock of the name (safety property S5). fence() is fence.lua's,
-- forget_gone() and join() queue.lua's, both prepended to this script.
local token, ttl = ARGV[1], tonumber(ARGV[2])
local limit, patience = tonumber(ARGV[3]), tonumber(ARGV[4])
local resize = ARGV[5] == '1'
local k = tonumber(ARGV[6] or '1')

if redis.call('EXISTS', KEYS[3]) == 1 then
  return {0, -2}
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])

-- Another kind of holder (a lease's string, a reentrant lock's hash): the
-- name is held; wait as for a lease.
local kind = redis.call('TYPE', KEYS[1])['ok']
local held = 0
if kind == 'zset' then
  local mine = redis.call('ZSCORE', KEYS[1], token)
  if mine and tonumber(mine) > now_ms then
    return tonumber(redis.call('HGET', KEYS[6], token))
  end
  -- Permits past their expiry are free: drop them, a bounded number per
  -- call (renew.lua and release.lua refuse an expired permit too, so one
  -- left here until the next call is no holder).
  local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'LIMIT', 0, 100)
  if #dead > 0 then
    redis.call('ZREM', KEYS[1], unpack(dead))
    redis.call('HDEL', KEYS[6], unpack(dead))
  end
  held = redis.call('ZCOUNT', KEYS[1], '(' .. now_ms, '+inf')
  -- While permits are held, the N they were taken under stands. (With
  -- none held, a stored N is a dead set's: the next grant replaces it. A
  -- set without one was taken by an older tenure: the next grant stores
  -- its N.)
  if held > 0 then
    local stored = tonumber(redis.call('HGET', KEYS[6], 'n'))
    if stored and stored ~= limit then
      if not resize then
        return {0, -3, stored}
      end
      redis.call('HSET', KEYS[6], 'n', ARGV[3])
    end
  end
elseif kind ~= 'none' then
  held = -1
end

-- Forget waiters that stopped asking, then find this request's place: a
-- fair request at its rank, a barging one behind the whole queue, which it
-- never passes: a waiting writer of a read-write lock (a lease in the
-- queue) keeps new readers (barging permits) out.
local ahead = 0
if patience > 0 or redis.call('EXISTS', KEYS[4]) == 1 then
  forget_gone(KEYS[4], KEYS[5], now_ms)
  ahead = redis.call('ZCARD', KEYS[4])
  if patience > 0 then
    ahead = redis.call('ZRANK', KEYS[4], token) or ahead
  end
end

if held >= 0 and held + ahead + k <= limit and (patience > 0 or ahead == 0) then
  local f = fence(KEYS[2], ttl)
  if type(f) == 'table' then
    return f -- a corrupt counter: nothing taken
  end
  redis.call('ZADD', KEYS[1], now_ms + ttl, token)
  for i = 2, k do
    redis.call('ZADD', KEYS[1], now_ms + ttl, token .. '#' .. i)
  end
  redis.call('HSET', KEYS[6], token, string.format('%.0f', f), 'n', ARGV[3])
  -- The keys outlive their longest-lived permit, and no more: the fence
  -- counter too, which the SET above may have shortened below another
  -- permit's expiry.
  local left = math.max(redis.call('PTTL', KEYS[1]), ttl)
  redis.call('PEXPIRE', KEYS[1], left)
  redis.call('PEXPIRE', KEYS[6], left)
  redis.call('PEXPIRE', KEYS[2], left)
  if patience > 0 then
    for i = 1, k do
      local m = token
      if i > 1 then
        m = token .. '#' .. i
      end
      redis.call('ZREM', KEYS[4], m)
      redis.call('ZREM', KEYS[5], m)
    end
  end
  return f
end

local wait
if held < 0 then
  wait = redis.call('PTTL', KEYS[1])
elseif held + k > limit then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  wait = math.max(0, tonumber(first[2]) - now_ms)
else
  -- Free, but promised to waiters ahead: wait at most until the head is
  -- forgotten.
  wait = 0
  local head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
  if head then
    wait = math.max(0, tonumber(redis.call('ZSCORE', KEYS[5], head) or now_ms) - now_ms)
  end
end
local free = -1
if held >= 0 then
  free = math.max(0, limit - held)
end
local arrival = 0
if patience > 0 then
  arrival = join(KEYS[4], KEYS[5], token, now_us, now_ms, patience)
  for i = 2, k do
    join(KEYS[4], KEYS[5], token .. '#' .. i, arrival, now_ms, patience)
  end
end
return {0, wait, arrival, free}
