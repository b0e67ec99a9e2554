-- read_unlock.lua: leave the read half of a Redisson RReadWriteLock once
-- (RedissonReadLock's unlockInnerAsync); prepended with publish.lua.
--
-- KEYS[1]  the lock's hash
-- KEYS[2]  its channel, redisson_rwlock:{NAME}
-- KEYS[3]  the reader's timeout prefix, {NAME}:<field>:rwlock_timeout
-- KEYS[4]  the prefix of every reader's timeout keys, {NAME}
-- KEYS[5]  this unlock's latch, redisson_unlock_latch:{NAME}:<request id>
-- ARGV[1]  the reader's field
-- ARGV[2]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[3]  how long the latch remembers the answer, ms
--
-- Returns  1 when the hash went (no reader or writer left): '0' is
--            published on KEYS[2];
--          0 when others (or the reader's other entries) still hold: the
--            hash lives as long as the longest-lived read entry left;
--          nil (false) when ARGV[1] holds no read entry.
-- As Redisson's, a hash without a mode is answered nil after a message:
-- waiters look again at a lock that expired under them.
local done = redis.call('GET', KEYS[5])
if done then
  return tonumber(done)
end
local mode = redis.call('HGET', KEYS[1], 'mode')
if mode == false then
  publish(ARGV[2], KEYS[2], '0')
  redis.call('SET', KEYS[5], 1, 'PX', ARGV[3])
  return false
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return false
end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if n == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('DEL', KEYS[3] .. ':' .. (n + 1))
if redis.call('HLEN', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
    local count = tonumber(redis.call('HGET', KEYS[1], field))
    if count then
      for i = count, 1, -1 do
        local left = redis.call('PTTL', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
        longest = math.max(longest, left)
      end
    end
  end
  if longest > 0 then
    redis.call('PEXPIRE', KEYS[1], longest)
    redis.call('SET', KEYS[5], 0, 'PX', ARGV[3])
    return 0
  end
  if mode == 'write' then
    redis.call('SET', KEYS[5], 0, 'PX', ARGV[3])
    return 0
  end
end
redis.call('DEL', KEYS[1])
publish(ARGV[2], KEYS[2], '0')
redis.call('SET', KEYS[5], 1, 'PX', ARGV[3])
return 1
