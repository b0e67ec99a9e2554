-- downgrade.lua: turn a writer's lease of a read-write lock into one read
-- permit, in one step, so that no writer or other holder gets in between.
--
-- KEYS[1]  the name's key, P{N}: the writer's lease (a string holding its
--          token) before, a sorted set of one permit (permit.lua) after
-- KEYS[2]  the fencing counter, P{N}:fence
-- KEYS[3]  the marker abandon.lua leaves for the read permit's request,
--          P{N}:retired:<ARGV[2]>
-- KEYS[4]  each permit's fence and the stored N, P{N}:permits
-- ARGV[1]  the writer's token
-- ARGV[2]  the read permit's token
-- ARGV[3]  the read permit's TTL in milliseconds
-- ARGV[4]  the readers' N (permit.lua's ARGV[3]), stored in KEYS[4]'s 'n'
--
-- Returns  fence, an integer, when ARGV[1] held the name and now ARGV[2]
--            holds its only permit: a new fence, greater than the writer's
--            (fence(), as permit.lua makes them: safety property S5); the
--            readers waiting are told on P{N}:released. Also when ARGV[2]
--            holds it already (a resent request gets the first answer);
--          0 when ARGV[1] does not hold the name: nothing is touched;
--         -2 when the read permit's request was abandoned (abandon.lua
--            ran): nothing is touched.
-- fence() is fence.lua's, server_ms() letgo.lua's, publish() publish.lua's
-- or spublish.lua's, all prepended.
if redis.call('EXISTS', KEYS[3]) == 1 then
  return -2
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'zset' then
  local f = redis.call('HGET', KEYS[4], ARGV[2])
  if f and redis.call('ZSCORE', KEYS[1], ARGV[2]) then
    return tonumber(f)
  end
  return 0
end
if kind ~= 'string' or redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local ttl = tonumber(ARGV[3])
local f = fence(KEYS[2], ttl)
if type(f) == 'table' then
  return f -- a corrupt counter: nothing taken
end
local now_ms = server_ms()
redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZADD', KEYS[1], now_ms + ttl, ARGV[2])
redis.call('HSET', KEYS[4], ARGV[2], string.format('%.0f', f), 'n', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[4], ttl)
publish(KEYS[1] .. ':released')
return f
