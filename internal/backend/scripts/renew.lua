-- renew.lua: compare-and-PEXPIRE, the watchdog's renewal.
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  the fencing counter, P{N}:fence
-- ARGV[1]  a lease's token, or a reentrant lock's owner
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  'h' for a reentrant lock (a hash of owner -> count), '' for a lease
--
-- Returns  1 when ARGV[1] still holds the name: its remaining TTL is now at
--            least ARGV[2] ms (never shortened, so a late or repeated renewal
--            with a smaller TTL cannot cut it short: safety property S8), and
--            the fencing counter lives exactly as long as the lock key;
--          0 when the name is held by another token, owner or kind;
--         -1 when the name is free: its key was deleted, or expired.
-- pcall: GET or HEXISTS on a key of another kind is an error reply, which is
-- simply "not this holder".
if ARGV[3] == 'h' then
  if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) ~= 1 then
    return redis.call('EXISTS', KEYS[1]) - 1
  end
else
  local v = redis.pcall('GET', KEYS[1])
  if v ~= ARGV[1] then
    if v == false then
      return -1
    end
    return 0
  end
end
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[2]) then
  left = ARGV[2]
  redis.call('PEXPIRE', KEYS[1], left)
end
-- The counter must outlive no hold, and a re-entry reads it while the name
-- is held. A counter gone missing is re-seeded from the clock by the next
-- acquisition (acquire.lua), so PEXPIRE of a missing key is no error.
redis.call('PEXPIRE', KEYS[2], left)
return 1
