-- sem_reclaim.lua: prepended (after publish.lua) to the scripts of package
-- redisson's RPermitExpirableSemaphore that reclaim expired permits before
-- they look; it defines reclaim() and runs nothing.
--
-- An RPermitExpirableSemaphore keeps its free permits as an integer at the
-- name, and each permit taken as a member of {NAME}:timeout: the permit's
-- 16-byte id, scored with its expiry in ms of the wall clock of the client
-- that took it (922337203685477 for a permit without a lease time). Nobody
-- expires a permit but the scripts: each of Redisson's that looks first
-- gives back the permits whose expiry is at or before the caller's now.

-- reclaim gives back the permits in timeouts whose expiry is at or before
-- now, at most limit of them (-1: every one): they leave the sorted set and
-- value grows by their number; a value then positive is published on
-- channel (its number wakes as many waiters). It returns the new value, or
-- nil when no permit had expired. The ids go out in slices, for unpack()
-- has a limit; what they do is what one ZREM of them all would.
local function reclaim(value, timeouts, channel, now, limit, cmd)
  local ids = redis.call('ZRANGEBYSCORE', timeouts, 0, now, 'LIMIT', 0, limit)
  if #ids == 0 then
    return nil
  end
  for from = 1, #ids, 1000 do
    redis.call('ZREM', timeouts, unpack(ids, from, math.min(from + 999, #ids)))
  end
  local v = redis.call('INCRBY', value, #ids)
  if v > 0 then
    publish(cmd, channel, v)
  end
  return v
end
