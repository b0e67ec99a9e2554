-- record_delete.lua: deletes an election's leader record at the end of a
-- term, while the leader's lease still holds the name, so that a
-- successor's record is never touched.
--
-- KEYS[1]  the lease key, P{N}
-- KEYS[2]  the leader record, P{N}:leader
-- ARGV[1]  the lease's token
--
-- Returns  1 when P{N} held ARGV[1] and the record is gone (whether or not
--            there was one), 0 when P{N} does not hold ARGV[1]: nothing was
--            deleted.
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' or v ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[2])
return 1
