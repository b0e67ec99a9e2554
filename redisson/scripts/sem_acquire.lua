-- sem_acquire.lua: take permits of an RPermitExpirableSemaphore
-- (RedissonPermitExpirableSemaphore's tryAcquireAsync(ids, timeoutDate));
-- prepended with publish.lua and sem_reclaim.lua.
--
-- As many expired permits as are asked for are reclaimed first. When the
-- free permits number at least ARGV[1], they are taken: each id joins the
-- timeouts with the expiry ARGV[2], and the timeouts get the value's TTL
-- if it has one.
--
-- KEYS[1]  the free permits, the name
-- KEYS[2]  the timeouts, {NAME}:timeout
-- KEYS[3]  the channel, redisson_sc:{NAME}
-- ARGV[1]  how many permits (the number of ids)
-- ARGV[2]  their expiry, ms in the caller's clock, or ARGV[4]
-- ARGV[3]  now, ms in the caller's clock
-- ARGV[4]  the expiry of a permit without a lease time, 922337203685477
-- ARGV[5]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[6…] the permits' ids, 16 bytes each
--
-- Returns  {1, 0} when taken; else {0, t}: t the earliest expiry of a
--          permit taken (when another may come free, in its taker's
--          clock), -1 when there is none or it never expires.
local n = tonumber(ARGV[1])
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], n, ARGV[5])
local free = redis.call('GET', KEYS[1])
if free and tonumber(free) >= n then
  redis.call('DECRBY', KEYS[1], n)
  for i = 6, #ARGV do
    redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  return {1, 0}
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] and tonumber(first[2]) ~= tonumber(ARGV[4]) then
  return {0, tonumber(first[2])}
end
return {0, -1}
