-- sem_release.lua: give a permit of an RPermitExpirableSemaphore back
-- (RedissonPermitExpirableSemaphore's tryReleaseAsync(permitId));
-- prepended with publish.lua.
--
-- A permit still in the timeouts leaves them and its permit is free again,
-- expired or not, and the new number of free permits is published. No
-- other expired permit is reclaimed here.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the channel, redisson_sc:{NAME}
-- KEYS[3]  the timeouts, {NAME}:timeout
-- ARGV[1]  the permit's id, 16 bytes
-- ARGV[2]  now, ms in the caller's clock
-- ARGV[3]  'PUBLISH' or 'SPUBLISH' (publish.lua)
--
-- Returns  1 when the permit was given back; -1 when it was, but had
--          expired by now; 0 when it was not there (released, reclaimed,
--          or never taken).
local expiry = redis.call('ZSCORE', KEYS[3], ARGV[1])
if redis.call('ZREM', KEYS[3], ARGV[1]) ~= 1 then
  return 0
end
local v = redis.call('INCRBY', KEYS[1], 1)
publish(ARGV[3], KEYS[2], v)
if tonumber(expiry) <= tonumber(ARGV[2]) then
  return -1
end
return 1
