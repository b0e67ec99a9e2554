-- redisson_revoke.lua: "tenure release --force --redisson NAME" takes a
-- Redisson lock (RLock, RFencedLock, RFairLock, RReadWriteLock) from its
-- holders in a form Java clients respect. Each holder's field
-- <client id>:<thread id> is replaced by the revocation field ARGV[2] ..
-- <field>, with the same count, in the same hash, which keeps its TTL: Java
-- and Go lockers still find the hash held by a field not theirs, a Java
-- holder's renewal and unlock find their field gone, and a read-write
-- lock's mode becomes 'write', so that no new reader joins. Then '0' (an
-- RLock's channel) or '1' (an RReadWriteLock's) is published: a Go holder
-- listening on its lock's channel looks at its field at once, stops its
-- work, and confirms (redisson_confirm.lua), which frees the name; a
-- holder that never confirms leaves the hash to its TTL. With 'now', the
-- hash is deleted and the message published, as Java's forceUnlock does.
-- A hash without a TTL is deleted: there is no holder's TTL to wait out.
--
-- KEYS[1]  the lock's hash, NAME
-- KEYS[2]  an RLock's channel, redisson_lock__channel:{NAME}
-- KEYS[3]  an RReadWriteLock's, redisson_rwlock:{NAME}: the one used when
--          the hash has a 'mode'
-- ARGV[1]  'PUBLISH' or 'SPUBLISH'
-- ARGV[2]  the revocation fields' prefix, 'tenure-revoked:'
-- ARGV[3]  'revoke' or 'now'
--
-- Returns  {'none'} when NAME does not exist;
--          {'type', pttl, <type>} when it is not a hash: nothing changes;
--          {what, pttl, field, count, ...} with the hash's fields and
--            counts before the call ('mode' left out), what being
--            'already' when every field was a revocation already and
--            nothing changed, 'revoked' when the holders' fields were
--            replaced by revocations, 'deleted' when the hash was deleted
--            ('now', or no TTL).
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 then
  return {'none'}
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'hash' then
  return {'type', pttl, t}
end
local all = redis.call('HGETALL', KEYS[1])
local owners, live, rw = {}, 0, false
for i = 1, #all, 2 do
  local f, n = all[i], all[i + 1]
  if f == 'mode' then
    rw = true
  else
    table.insert(owners, f)
    table.insert(owners, n)
    if string.sub(f, 1, #ARGV[2]) ~= ARGV[2] then
      live = live + 1
    end
  end
end
local message, channel = '0', KEYS[2]
if rw then
  message, channel = '1', KEYS[3]
end
if ARGV[3] == 'now' or pttl < 0 then
  redis.call('DEL', KEYS[1])
  publish(ARGV[1], channel, message)
  return {'deleted', pttl, unpack(owners)}
end
if live == 0 then
  return {'already', pttl, unpack(owners)}
end
for i = 1, #owners, 2 do
  local f = owners[i]
  if string.sub(f, 1, #ARGV[2]) ~= ARGV[2] then
    -- HSET first: a hash left empty would be deleted, and its TTL lost.
    redis.call('HSET', KEYS[1], ARGV[2] .. f, owners[i + 1])
    redis.call('HDEL', KEYS[1], f)
  end
end
if rw then
  redis.call('HSET', KEYS[1], 'mode', 'write')
end
publish(ARGV[1], channel, message)
return {'revoked', pttl, unpack(owners)}
