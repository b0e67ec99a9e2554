-- sem_lease.lua: the lease time left to a permit of an
-- RPermitExpirableSemaphore (RedissonPermitExpirableSemaphore's
-- getLeaseTimeAsync); prepended with publish.lua and sem_reclaim.lua.
--
-- Every expired permit is reclaimed first, this one included.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the timeouts, {NAME}:timeout
-- KEYS[3]  the channel, redisson_sc:{NAME}
-- ARGV[1]  the permit's id, 16 bytes
-- ARGV[2]  the expiry of a permit without a lease time, 922337203685477
-- ARGV[3]  now, ms in the caller's clock
-- ARGV[4]  'PUBLISH' or 'SPUBLISH' (publish.lua)
--
-- Returns  the ms left to the permit's expiry (in the caller's clock, so
--          at least 1); -1 when it has no lease time; 0 when it is not
--          taken (released, reclaimed, or never taken).
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], -1, ARGV[4])
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not expiry then
  return 0
end
if tonumber(expiry) == tonumber(ARGV[2]) then
  return -1
end
return tonumber(expiry) - tonumber(ARGV[3])
