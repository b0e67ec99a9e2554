-- force.lua: delete a Redisson lock whoever holds it (forceUnlock);
-- prepended with publish.lua.
--
-- KEYS[1]  the lock's hash
-- KEYS[2]  its channel: redisson_lock__channel:{NAME} for an RLock,
--          redisson_rwlock:{NAME} for either half of an RReadWriteLock
-- ARGV[1]  the message: '0' for an RLock and a read lock, '1' (Redisson's
--          READ_UNLOCK_MESSAGE, which wakes every waiter) for a write lock
-- ARGV[2]  'PUBLISH' or 'SPUBLISH' (publish.lua)
-- ARGV[3]  absent for an RLock; 'read' or 'write' for an RReadWriteLock:
--          the hash is deleted only when its mode is that one, as
--          Redisson's RReadLock and RWriteLock force-unlock
--
-- Returns  1 when the hash was deleted (and the message published),
--          0 when there was nothing to delete (or the mode differed).
if ARGV[3] then
  if redis.call('HGET', KEYS[1], 'mode') ~= ARGV[3] then
    return 0
  end
  redis.call('DEL', KEYS[1])
elseif redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
publish(ARGV[2], KEYS[2], ARGV[1])
return 1
