-- sem_acquired.lua: how many permits of an RPermitExpirableSemaphore are
-- taken, every expired permit reclaimed first
-- (RedissonPermitExpirableSemaphore's acquiredPermitsAsync); prepended with
-- publish.lua and sem_reclaim.lua.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the timeouts, {NAME}:timeout
-- KEYS[3]  the channel, redisson_sc:{NAME}
-- ARGV[1]  now, ms in the caller's clock
-- ARGV[2]  'PUBLISH' or 'SPUBLISH' (publish.lua)
--
-- Returns  the number of permits taken and not expired in the caller's
--          clock (those without a lease time included).
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], -1, ARGV[2])
return redis.call('ZCOUNT', KEYS[2], 0, '+inf')
