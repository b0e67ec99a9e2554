-- abandon.lua: take back an acquire whose outcome is unknown (it timed out,
-- or its connection broke), whether it was applied already or is still on
-- its way to the server (safety property S7).
--
-- KEYS[1]  the lease key, P{N}
-- KEYS[2]  the abandoned token's marker, P{N}:abandoned:<token>
-- ARGV[1]  the abandoned token
-- ARGV[2]  the name's release channel, P{N}:released
-- ARGV[3]  the TTL the acquire asked for, in milliseconds
--
-- Returns  1 when the acquire had been applied: the lease is deleted and
--            waiters are told;
--          0 when it had not: a marker now makes acquire.lua refuse that token
--            for a TTL, so a request that arrives late cannot leave a lease
--            that nobody holds.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
return 0
