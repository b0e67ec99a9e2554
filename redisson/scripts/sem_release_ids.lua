-- sem_release_ids.lua: give several permits of an
-- RPermitExpirableSemaphore back, all or none
-- (RedissonPermitExpirableSemaphore's tryReleaseAsync(permitsIds));
-- prepended with publish.lua and sem_reclaim.lua.
--
-- When any id is not in the timeouts, or has expired in the caller's
-- clock, nothing changes (not even a reclaim). Else every expired permit
-- is reclaimed first, then the ids leave the timeouts, the free permits
-- grow by their number, and that number is published: it wakes as many
-- waiters.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the channel, redisson_sc:{NAME}
-- KEYS[3]  the timeouts, {NAME}:timeout
-- ARGV[1]  now, ms in the caller's clock
-- ARGV[2]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[3…] the permits' ids, 16 bytes each, no two the same
--
-- Returns  the number of permits given back (every id); else -i, i the
--          position (from 1) of the first id not taken or expired.
for i = 3, #ARGV do
  local expiry = redis.call('ZSCORE', KEYS[3], ARGV[i])
  if not expiry or tonumber(expiry) <= tonumber(ARGV[1]) then
    return -(i - 2)
  end
end
reclaim(KEYS[1], KEYS[3], KEYS[2], ARGV[1], -1, ARGV[2])
local removed = 0
for from = 3, #ARGV, 1000 do
  removed = removed + redis.call('ZREM', KEYS[3], unpack(ARGV, from, math.min(from + 999, #ARGV)))
end
redis.call('INCRBY', KEYS[1], removed)
publish(ARGV[2], KEYS[2], removed)
return removed
