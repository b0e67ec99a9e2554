-- release_lease.lua: release.lua for a lease (ARGV[3] absent), the common
-- case. internal/backend puts this file right after publish.lua (or
-- spublish.lua), ahead of letgo.lua and release.lua, because every `local
-- function` of a script is a closure made at each run of it: a lease's
-- release returns before any of theirs is made. KEYS, ARGV and replies are
-- release.lua's.
--
-- A lease's copy resent after a lost reply finds the key no longer its
-- own, so the marker KEYS[2] is looked up only then, and answers 1 while
-- it lives. pcall: GET on a key of another kind is an error reply, which
-- is simply "not this holder".
if not ARGV[3] then
  if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
    return redis.call('EXISTS', KEYS[2])
  end
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '0' then
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
  end
  publish(KEYS[1] .. ':released')
  return 1
end
