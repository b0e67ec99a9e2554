-- renew.lua: keep a Go holder's Redisson lock alive (what Redisson's
-- watchdog does, LockTask and ReadLockTask since 3.44), without ever
-- shortening it (docs/design.md S8): a Java holder's renewal sets the
-- hash's TTL outright, tenure's sets it only when that lengthens it.
--
-- KEYS[1]  the lock's hash
-- KEYS[2]  a reader only: its timeout prefix, {NAME}:<field>:rwlock_timeout
-- ARGV[1]  the TTL, milliseconds
-- ARGV[2]  the holder's field (a writer's ends in ':write')
--
-- Returns  1 when the field is in the hash: the hash, and a reader's
--          timeout keys 1..count, live at least ARGV[1] ms more;
--          0 when it is not: the lock was lost (expired, or deleted by a
--          force unlock).
local count = redis.call('HGET', KEYS[1], ARGV[2])
if not count then
  return 0
end
local ttl = tonumber(ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if KEYS[2] then
  for i = 1, tonumber(count) do
    local key = KEYS[2] .. ':' .. i
    if redis.call('PTTL', key) < ttl then
      redis.call('SET', key, 1, 'PX', ttl)
    end
  end
end
return 1
