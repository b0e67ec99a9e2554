-- sem_add.lua: add permits to an RPermitExpirableSemaphore, or take some
-- away when ARGV[1] is negative (RedissonPermitExpirableSemaphore's
-- addPermitsAsync); prepended with publish.lua.
--
-- The free permits (none when the name is absent) grow by ARGV[1]; a
-- positive ARGV[1] is published, to wake as many waiters.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the channel, redisson_sc:{NAME}
-- ARGV[1]  the number of permits to add
-- ARGV[2]  'PUBLISH' or 'SPUBLISH' (publish.lua)
--
-- Returns  the free permits after.
local v = tonumber(redis.call('GET', KEYS[1]) or 0) + tonumber(ARGV[1])
redis.call('SET', KEYS[1], v)
if tonumber(ARGV[1]) > 0 then
  publish(ARGV[2], KEYS[2], ARGV[1])
end
return v
