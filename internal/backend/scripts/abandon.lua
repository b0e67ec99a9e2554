-- abandon.lua: take back an acquire whose outcome is unknown (it timed out,
-- or its connection broke), whether it was applied already or is still on
-- its way to the server (safety property S7).
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  the abandoned request's marker, P{N}:retired:<token>
-- KEYS[3]  the fair queue, P{N}:queue
-- KEYS[4]  the queue's expiries, P{N}:queue:expiry
-- KEYS[5]  for a semaphore's permit: P{N}:permits (permit.lua); for a
--          reentrant lock: the fencing counter, P{N}:fence
-- ARGV[1]  the abandoned request's token (for a reentrant lock's re-entry,
--          reenter.lua's op)
-- ARGV[2]  the name's release channel, P{N}:released
-- ARGV[3]  the TTL the acquire asked for, in milliseconds
-- ARGV[4]  the reentrant lock's owner, or '' for a lease
-- ARGV[5]  'z' when the request was for a semaphore's permit; absent
--          otherwise
-- ARGV[6]  for a permit: k, how many permits the request asked for
--          (permit.lua's ARGV[6]); absent for 1. Its k members leave the
--          set, and the queue
--
-- Returns  1 when the acquire had been applied: the lease (or the one
--            entry the request added to the owner's count, or the permit)
--            is taken back and waiters are told (a permit's set lives on as
--            long as its latest permit left: settle() is letgo.lua's,
--            prepended to this script);
--          0 when it had not, or its entry is gone with the hold it entered.
-- A reentrant request that entered left its entry mark at KEYS[2]
-- (acquire.lua, reenter.lua: 'e<count>:<fence>'): only that mark tells its
-- entry from those of others sharing the owner, and the fence it names
-- tells the hold it entered from a later hold of the same owner, whose
-- entries are not the request's to take.
-- Either way a marker now makes acquire.lua refuse the request for a TTL, so
-- a copy that arrives late (a client library's retry) leaves nothing, and the
-- request leaves the fair queue.
local mark = ARGV[4] ~= '' and redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
local k = tonumber(ARGV[6] or '1')
local rank = redis.call('ZRANK', KEYS[3], ARGV[1])
zrem_permit(KEYS[3], ARGV[1], k)
zrem_permit(KEYS[4], ARGV[1], k)
local applied = 0
if ARGV[5] == 'z' then
  if type(redis.pcall('ZSCORE', KEYS[1], ARGV[1])) == 'string' then
    zrem_permit(KEYS[1], ARGV[1], k)
    redis.call('HDEL', KEYS[5], ARGV[1])
    settle(KEYS[1], KEYS[5], server_ms())
    applied = 1
  end
elseif ARGV[4] == '' then
  if redis.pcall('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    applied = 1
  end
elseif mark then
  local f = string.match(mark, '^e%d+:(%d+)$')
  local count = tonumber(redis.pcall('HGET', KEYS[1], ARGV[4]) or '')
  if f and count and tonumber(f) == (tonumber(redis.call('GET', KEYS[5])) or 0) then
    if count > 1 then
      redis.call('HINCRBY', KEYS[1], ARGV[4], -1)
    else
      redis.call('HDEL', KEYS[1], ARGV[4])
    end
    applied = 1
  end
end
-- Whoever stops blocking others wakes them: a hold we let go, or a place
-- in the queue we left, may let a waiter in whenever the name is free or
-- held by permits (a barging permit waits while anyone is queued, a fair
-- one counts those queued ahead of it). A lease or a reentrant lock that
-- others still hold lets nobody in. wake() is letgo.lua's, prepended.
if applied == 1 or rank then
  wake(KEYS[1], ARGV[2])
end
return applied
