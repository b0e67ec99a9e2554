-- lock.lua: take or re-enter a Redisson RLock (RedissonLock's
-- tryLockInnerAsync), or an RFencedLock when KEYS[2] is given
-- (RedissonFencedLock's): the lock is a hash whose only field is its
-- holder, <client id>:<thread id>, counting the holder's entries.
--
-- KEYS[1]  the lock's hash, the (mapped) name itself
-- KEYS[2]  RFencedLock only: its token counter, redisson_lock_token:{NAME}
-- ARGV[1]  the hash's TTL, milliseconds
-- ARGV[2]  the holder's field
--
-- Returns  {-1, token, count} when ARGV[2] now holds the lock (token -1
--          without KEYS[2]): its count went up by one, to count, and the
--          hash lives ARGV[1] ms; {pttl, -1, 0} when another holder has it,
--          pttl being the hash's remaining life (-1 if it has no TTL). The
--          fenced token goes up on every entry, re-entries included, as
--          Java's does. (Redisson's script answers nil or the PTTL; the
--          count tells tenure a re-entry from a fresh take.)
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then
  return {redis.call('PTTL', KEYS[1]), -1, 0}
end
local token = -1
if KEYS[2] then
  token = redis.call('INCR', KEYS[2])
end
local count = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {-1, token, count}
