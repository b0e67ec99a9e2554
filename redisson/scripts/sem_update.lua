-- sem_update.lua: give a permit of an RPermitExpirableSemaphore a new
-- expiry (RedissonPermitExpirableSemaphore's updateLeaseTimeAsync);
-- prepended with publish.lua and sem_reclaim.lua.
--
-- Every expired permit is reclaimed first, this one included: a permit
-- whose expiry has passed in the caller's clock is not brought back.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the timeouts, {NAME}:timeout
-- KEYS[3]  the channel, redisson_sc:{NAME}
-- ARGV[1]  the permit's id, 16 bytes
-- ARGV[2]  its new expiry, ms in the caller's clock, or 922337203685477
-- ARGV[3]  now, ms in the caller's clock
-- ARGV[4]  'PUBLISH' or 'SPUBLISH' (publish.lua)
--
-- Returns  1 when the permit was there and has the new expiry, 0 when not.
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], -1, ARGV[4])
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  return 1
end
return 0
