-- sem_set.lua: set the number of permits of an RPermitExpirableSemaphore
-- (RedissonPermitExpirableSemaphore's trySetPermitsAsync when ARGV[3] is
-- 'try', setPermitsAsync when 'set'); prepended with publish.lua.
--
-- 'try' sets the free permits only when the name has none yet; 'set'
-- makes the free and the taken permits (expired or not) number ARGV[1] by
-- moving the free ones. Either publishes ARGV[1] when it changed anything.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the channel, redisson_sc:{NAME}
-- KEYS[3]  the timeouts, {NAME}:timeout
-- ARGV[1]  the number of permits
-- ARGV[2]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[3]  'try' or 'set'
--
-- Returns  1 when it changed the permits, 0 when not.
local free = redis.call('GET', KEYS[1])
if not free then
  redis.call('SET', KEYS[1], ARGV[1])
  publish(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
if ARGV[3] == 'try' then
  return 0
end
local total = redis.call('ZCOUNT', KEYS[3], 0, '+inf') + tonumber(free)
if total == tonumber(ARGV[1]) then
  return 0
end
redis.call('INCRBY', KEYS[1], tonumber(ARGV[1]) - total)
publish(ARGV[2], KEYS[2], ARGV[1])
return 1
