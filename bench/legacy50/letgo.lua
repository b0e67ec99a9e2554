-- letgo.lua: what letting go of a permit or of a place in the fair queue
-- does, shared by renew.lua, release.lua, abandon.lua and leave.lua
-- (internal/backend prepends this file to each of them, after publish.lua
-- or spublish.lua, whose publish() wake calls; it defines functions and
-- runs nothing).
--
-- A semaphore's set (and its P{N}:permits hash, with the N it stores in
-- field 'n') lives exactly as long as its latest permit: permit.lua and renew.lua only ever raise the set's TTL
-- to a permit's new expiry, and every script that takes a permit out calls
-- settle, which lowers the TTL to the latest permit left, or deletes both
-- keys when none is left. So a set whose permits have all expired has
-- expired with them, and a lease, a reentrant lock or a writer of the name
-- finds it free (safety property S6: no key outlives its last holder).

-- settle sets the TTL of set and fences to the latest expiry among set's
-- permits (scores, server time in ms), or deletes both when every permit
-- has expired by now_ms or none is left: the stored N goes with the last
-- permit, and the next set takes its first requester's N.
local function settle(set, fences, now_ms)
  local last = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
  if #last == 0 or tonumber(last[2]) <= now_ms then
    redis.call('DEL', set, fences)
    return
  end
  local left = tonumber(last[2]) - now_ms
  redis.call('PEXPIRE', set, left)
  redis.call('PEXPIRE', fences, left)
end

-- zrem_permit removes from the sorted set key the members of a hold of k
-- permits under token (permit.lua): token, token#2 ... token#k. The same
-- members stand for a fair request of k in the queue and its expiries.
local function zrem_permit(key, token, k)
  redis.call('ZREM', key, token)
  for i = 2, k do
    redis.call('ZREM', key, token .. '#' .. i)
  end
end

-- server_ms is the server's clock in milliseconds.
local function server_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- wake tells the waiters of the name on channel that they may get in, when
-- they may: the name's key is gone, or it is a semaphore's set, whose free
-- permits go to the queue's head or to barging requests once the queue is
-- empty. A lease or a reentrant lock still held lets nobody in. It returns
-- 1 when it published.
local function wake(key, channel)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' or kind == 'zset' then
    publish(channel)
    return 1
  end
  return 0
end
