-- sem_available.lua: the free permits of an RPermitExpirableSemaphore,
-- every expired permit reclaimed first (RedissonPermitExpirableSemaphore's
-- availablePermitsAsync); prepended with publish.lua and sem_reclaim.lua.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the timeouts, {NAME}:timeout
-- KEYS[3]  the channel, redisson_sc:{NAME}
-- ARGV[1]  now, ms in the caller's clock
-- ARGV[2]  'PUBLISH' or 'SPUBLISH' (publish.lua)
--
-- Returns  the free permits (0 when the name is absent).
local v = reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], -1, ARGV[2])
if v then
  return v
end
return tonumber(redis.call('GET', KEYS[1]) or 0)
