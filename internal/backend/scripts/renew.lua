-- renew.lua: compare-and-PEXPIRE, the watchdog's renewal.
--
-- KEYS[1]  the lease key, P{N}
-- ARGV[1]  the holder's token
-- ARGV[2]  the TTL in milliseconds
--
-- Returns  1 when ARGV[1] still holds the lease: its remaining TTL is now at
--            least ARGV[2] ms (never shortened, so a late or repeated renewal
--            with a smaller TTL cannot cut a lease short: safety property S8);
--          0 when the name is free or held by another token or kind.
-- pcall: GET on a key of another kind is an error reply, which is simply
-- "not this token".
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
