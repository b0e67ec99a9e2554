-- reenter.lua: a reentrant lock's owner enters the lock it holds once more.
-- Unlike acquire.lua it never takes a free name: an owner that lost its lock
-- must learn so, not start a new hold under its old fencing token.
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  this re-entry's marker, P{N}:retired:<op>
-- KEYS[3]  the fencing counter, P{N}:fence
-- ARGV[1]  the owner
-- ARGV[2]  the TTL in milliseconds (the key's TTL is never shortened)
-- ARGV[3]  how long to remember this re-entry, in milliseconds
--
-- Returns  the owner's count after entering, or 0 when the owner does not
--          hold the name, or the re-entry was taken back (abandon.lua ran
--          for op) before it arrived: nothing is touched. A copy of the
--          request resent after a lost reply gets the first answer and adds
--          nothing.
-- The marker is acquire.lua's entry mark, 'e<count>:<fence>': abandon.lua
-- takes back the one entry it stands for, while the hold of that fence
-- lives.
local done = redis.call('GET', KEYS[2])
if done then
  return tonumber(string.match(done, '^e(%d+):')) or 0
end
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) ~= 1 then
  return 0
end
local count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local f = tonumber(redis.call('GET', KEYS[3])) or 0
redis.call('SET', KEYS[2], 'e' .. count .. ':' .. string.format('%.0f', f), 'PX', ARGV[3])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return count
