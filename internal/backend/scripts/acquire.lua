-- acquire.lua: take a free name and hand out its next fencing token. One
-- script for both kinds of holder (one name is one lock, whatever holds it):
-- a lease (a string holding its token) and a reentrant lock (a hash of owner
-- -> count), and for both ways of waiting: barging, and fair (a queue).
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  the fencing counter, P{N}:fence: it outlives the lock key by at
--          most one TTL (this script gives it twice the TTL, renewals keep it
--          so: renew.lua, renew_leases.lua)
-- KEYS[3]  the marker abandon.lua leaves for this request, P{N}:retired:<token>
-- KEYS[4]  the fair queue, P{N}:queue: a sorted set of waiting tokens by arrival
-- KEYS[5]  when each queued token is forgotten, P{N}:queue:expiry: a sorted
--          set of tokens by server time in milliseconds
-- ARGV[1]  the request's random token (a lease's token; for a reentrant lock
--          it names the request, the owner names the holder)
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  the reentrant lock's owner; absent or '' for a lease
-- ARGV[4]  fair mode: how long, in milliseconds, the queue keeps this token
--          without another attempt; absent or '0' for a barging acquire,
--          which joins no queue but still waits behind a queue that exists
-- ARGV[5]  for a reentrant lock: how long, in milliseconds, KEYS[3]
--          remembers an entry this request made (entry_mark(), below): no
--          longer than the TTL, so that the mark never outlives the hold
--          by more than a TTL (S6)
--
-- Returns  fence, an integer, when the name is now held by a lease with
--                    token ARGV[1] (also when it was already, as below): the
--                    common answer, kept small;
--          {1, fence, count} when the name is now held: a lease by ARGV[1]
--                    (also when it was already, so a client library that resends
--                    a request whose reply was lost gets the first answer), or a
--                    reentrant lock by ARGV[3], entered count times; the fence is
--                    the one of the acquisition that took the free name;
--          {0, wait[, arrival]} when the name is held by another holder or kind, or free but
--                    promised to the head of the queue: wait is how long, in
--                    milliseconds, before it could be free even if nobody lets
--                    go (the holder's TTL, or the queue head's expiry), -1 when
--                    it never expires; a fair request also gets when it
--                    joined the queue (its score: server time in us), which
--                    orders the waiters of one process as the queue does;
--          {0, wait, arrival, -3} as {0, wait[, arrival]} when permits (a
--                    semaphore's, or a read-write lock's readers) hold the
--                    name: arrival is 0 for a barging request; -3 says who
--                    holds, for the waiter's error ("held by readers");
--          {0, -2}   when its sender already gave this request up (it arrived
--                    after abandon.lua ran), or, for a reentrant lock, when
--                    it was applied once and its entry is gone since:
--                    nothing is touched.
--
-- A reentrant request that enters (takes the free name or enters again)
-- leaves at KEYS[3] the mark 'e<count>:<fence>', so that a copy a client
-- library resends after a lost reply gets the first answer instead of
-- entering twice (while the hold that it entered, the one of that fence,
-- lives), and so that abandon.lua can take back exactly the one entry it
-- made. A lease's request needs no mark: its copy finds its own token.
--
-- Every new fence is max(counter + 1, server TIME in microseconds), written
-- back (safety property S5). The clock term makes fences strictly increase
-- whatever data Redis comes back with: a counter lost in a restart, rolled
-- back to an older RDB snapshot or AOF tail, or left behind on a replica
-- that lagged and was promoted, is below the current time (unless the Redis
-- host's clock went backwards). The counter term keeps fences increasing
-- when two grants fall in one microsecond or the clock steps back a little
-- while the counter lives. So the counter may expire soon after the lock
-- key, and does: no key of a name outlives it by more than a TTL (S6). Fences stay exact in Lua's
-- doubles until 2^53 us, in 2255. fence() is fence.lua's, forget_gone()
-- and join() queue.lua's, both prepended to this script.
local token, ttl = ARGV[1], ARGV[2]
local owner, patience = ARGV[3] or '', tonumber(ARGV[4] or '0')

local function current_fence()
  return tonumber(redis.call('GET', KEYS[2]))
end

-- entry_mark remembers that this reentrant request entered, with the
-- owner's count after it and the hold's fence (entry_marked()'s format).
local function entry_mark(count, f)
  redis.call('SET', KEYS[3], 'e' .. count .. ':' .. string.format('%.0f', f), 'PX', ARGV[5])
end

-- A copy of a reentrant request that entered already: the first answer,
-- while the owner still holds the hold it entered; otherwise it is refused.
if owner ~= '' then
  local mark = redis.call('GET', KEYS[3])
  if mark then
    local count, f = string.match(mark, '^e(%d+):(%d+)$')
    if count and tonumber(f) == (current_fence() or 0) and redis.pcall('HEXISTS', KEYS[1], owner) == 1 then
      return {1, tonumber(f), tonumber(count)}
    end
    return {0, -2}
  end
end

-- A reentrant owner that holds the name enters once more, queue or not:
-- waiting behind its own lock would deadlock it.
if owner ~= '' and redis.pcall('HEXISTS', KEYS[1], owner) == 1 then
  local count = redis.call('HINCRBY', KEYS[1], owner, 1)
  local f = current_fence() or 0
  entry_mark(count, f)
  if redis.call('PTTL', KEYS[1]) < tonumber(ttl) then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  if patience > 0 then
    redis.call('ZREM', KEYS[4], token)
    redis.call('ZREM', KEYS[5], token)
  end
  return {1, f, count}
end

-- A barging request looks for a marker or a queue with one EXISTS before
-- the SET. A lease's request came through acquire_lease.lua first, which
-- has looked (lease_busy) and, finding neither, tried the SET NX
-- (lease_tried), or taken the name and left the broken counter it found to
-- fence() (lease_took): none of it is sent twice.
local head, now_ms, now_us
local busy = lease_busy
if busy == nil then
  busy = patience > 0 or redis.call('EXISTS', KEYS[3], KEYS[4]) > 0
end
if busy then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    return {0, -2}
  end
  local now = redis.call('TIME')
  now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
  forget_gone(KEYS[4], KEYS[5], now_ms)
  head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
end

if head == nil or head == token then
  local took
  if owner == '' then
    took = lease_took or (not lease_tried and redis.call('SET', KEYS[1], token, 'NX', 'PX', ttl))
  elseif redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], owner, 1)
    redis.call('PEXPIRE', KEYS[1], ttl)
    took = true
  end
  if took then
    if head then
      redis.call('ZREM', KEYS[4], token)
      redis.call('ZREM', KEYS[5], token)
    end
    -- Twice the TTL: the watchdog's cheap renewals leave the counter be
    -- for up to a TTL (renew_leases.lua).
    local f = fence(KEYS[2], 2 * tonumber(ttl))
    if type(f) == 'table' then
      -- A corrupt counter: take the name back so that the error leaves nothing.
      redis.call('DEL', KEYS[1])
      return f
    end
    if owner == '' then
      return f
    end
    entry_mark(1, f)
    return {1, f, 1}
  end
end

-- Not taken. SET NX never fails on another type (it only checks existence),
-- and GET of another type is an error reply: pcall makes it "not ours".
if owner == '' and redis.pcall('GET', KEYS[1]) == token then
  return current_fence()
end

local wait = redis.call('PTTL', KEYS[1])
local arrival
if patience > 0 then
  arrival = join(KEYS[4], KEYS[5], token, now_us, now_ms, patience)
  if head == nil then
    head = token
  end
end
if wait == -2 and head and head ~= token then
  -- Free, but promised to the head of the queue until it comes or is
  -- forgotten.
  local until_ms = redis.call('ZSCORE', KEYS[5], head)
  wait = 0
  if until_ms then
    wait = math.max(0, tonumber(until_ms) - now_ms)
  end
end
if wait ~= -2 and redis.call('TYPE', KEYS[1]).ok == 'zset' then
  return {0, wait, arrival or 0, -3}
end
if arrival then
  return {0, wait, arrival}
end
return {0, wait}
