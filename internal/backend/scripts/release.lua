-- release.lua: compare-and-delete, and a word to the waiters.
--
-- KEYS[1]  the lease key, P{N}
-- ARGV[1]  the holder's token
-- ARGV[2]  the name's release channel, P{N}:released
--
-- Returns  1 when ARGV[1] held the lease and it is now deleted (and a message
--            was published on ARGV[2]);
--          0 when the name is free or held by another token or kind: nothing
--            is touched.
-- pcall: GET on a key of another kind is an error reply, which is simply
-- "not this token".
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 1
