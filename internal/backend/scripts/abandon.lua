-- abandon.lua: take back an acquire whose outcome is unknown (it timed out,
-- or its connection broke), whether it was applied already or is still on
-- its way to the server (safety property S7).
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  the abandoned request's marker, P{N}:retired:<token>
-- KEYS[3]  the fair queue, P{N}:queue
-- KEYS[4]  the queue's expiries, P{N}:queue:expiry
-- KEYS[5]  for a semaphore's permit only: P{N}:permits (permit.lua)
-- ARGV[1]  the abandoned request's token
-- ARGV[2]  the name's release channel, P{N}:released
-- ARGV[3]  the TTL the acquire asked for, in milliseconds
-- ARGV[4]  the reentrant lock's owner, or '' for a lease
-- ARGV[5]  '1' when the owner was the abandoned request's alone (a fresh
--          random owner), so any count it has came from that request
-- ARGV[6]  'z' when the request was for a semaphore's permit; absent
--          otherwise
-- ARGV[7]  for a permit: k, how many permits the request asked for
--          (permit.lua's ARGV[6]); absent for 1. Its k members leave the
--          set, and the queue
--
-- Returns  1 when the acquire had been applied: the lease (or the owner's
--            entries, or the permit) is deleted and waiters are told
--            (a permit's set lives on as long as its latest permit left:
--            settle() is letgo.lua's, prepended to this script);
--          0 when it had not, or cannot be told apart from entries of others
--            sharing the owner.
-- Either way a marker now makes acquire.lua refuse the request for a TTL, so
-- a copy that arrives late (a client library's retry) leaves nothing, and the
-- request leaves the fair queue.
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
local k = tonumber(ARGV[7] or '1')
local rank = redis.call('ZRANK', KEYS[3], ARGV[1])
zrem_permit(KEYS[3], ARGV[1], k)
zrem_permit(KEYS[4], ARGV[1], k)
local applied = 0
if ARGV[6] == 'z' then
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
elseif ARGV[5] == '1' and redis.pcall('HEXISTS', KEYS[1], ARGV[4]) == 1 then
  redis.call('HDEL', KEYS[1], ARGV[4])
  applied = 1
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
