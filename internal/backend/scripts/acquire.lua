-- acquire.lua: take a free name and hand out its next fencing token.
--
-- KEYS[1]  the lease key, P{N}
-- KEYS[2]  the fencing counter, P{N}:fence (never expires)
-- KEYS[3]  the marker abandon.lua leaves for this token, P{N}:abandoned:<token>
-- ARGV[1]  the new holder's random token
-- ARGV[2]  the TTL in milliseconds
--
-- Returns  {1, fence} when the name was free and is now held by ARGV[1], or
--                     was already held by ARGV[1]: a client library that
--                     resends a request whose reply was lost gets the first
--                     request's answer instead of waiting on its own lease;
--          {0, pttl}  when anything holds the name (a lease or a lock of another
--                     kind): pttl is its remaining TTL in milliseconds, -1 when it
--                     has no expiry;
--          {0, -2}    when its sender already gave this token up (the request
--                     arrived after abandon.lua ran): nothing is touched.
--
-- The counter is seeded from the server clock in microseconds when it is
-- missing (INCR then answers 1), so a restart that lost every key still hands
-- out larger tokens than before (unless the Redis host's clock went
-- backwards). Fences stay exact in Lua's doubles until 2^53 us, in 2255.
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {0, -2}
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Held. SET NX never fails on another type: it only checks existence.
  local held = redis.pcall('GET', KEYS[1])
  if held == ARGV[1] then
    return {1, tonumber(redis.call('GET', KEYS[2]))}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local fence = redis.pcall('INCR', KEYS[2])
if type(fence) == 'table' then
  -- A corrupt counter: take the lease back so that the error leaves nothing.
  redis.call('DEL', KEYS[1])
  return fence
end
if fence == 1 then
  -- The counter was missing: seed it from the server clock.
  local now = redis.call('TIME')
  local seed = now[1] .. string.format('%06d', tonumber(now[2]))
  redis.call('SET', KEYS[2], seed)
  fence = tonumber(seed)
end
return {1, fence}
