-- redisson_confirm.lua: a "tenure run --redisson" whose lock "tenure
-- release --force --redisson" revoked (redisson_revoke.lua) confirms that
-- its command's process group is gone: it takes its revocation field out
-- of the hash, and the last field out deletes the hash and publishes the
-- release message, so that waiters, Java and Go, take the name at once
-- instead of waiting out the TTL the hash kept.
--
-- KEYS[1]  the lock's hash, NAME
-- KEYS[2]  an RLock's channel, redisson_lock__channel:{NAME}
-- KEYS[3]  an RReadWriteLock's, redisson_rwlock:{NAME}: the one used when
--          the hash has a 'mode'
-- ARGV[1]  'PUBLISH' or 'SPUBLISH'
-- ARGV[2]  the holder's revocation field: 'tenure-revoked:' .. its field
--
-- Returns  1 when the field was the last: the hash is deleted and '0' ('1'
--            on an RReadWriteLock's channel) published;
--          2 when it was taken out and other revoked holders remain (the
--            hash keeps its TTL);
--          0 when the hash holds no such field (never revoked, confirmed
--            already, or expired): nothing changes.
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HDEL', KEYS[1], ARGV[2]) == 0 then
  return 0
end
local rw = false
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if f == 'mode' then
    rw = true
  else
    return 2
  end
end
redis.call('DEL', KEYS[1])
local message, channel = '0', KEYS[2]
if rw then
  message, channel = '1', KEYS[3]
end
publish(ARGV[1], channel, message)
return 1
