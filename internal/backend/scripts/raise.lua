-- raise.lua: quorum mode's second step of an acquire. The nodes of a
-- majority hand out fences of their own (acquire.lua: max(counter + 1,
-- that node's clock)); the acquisition's fence is the largest, and every
-- node of the majority raises its counter to it, so that whoever acquires
-- the name next (on a majority, which meets this one) gets a larger fence
-- from at least one node.
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  the fencing counter, P{N}:fence
-- ARGV[1]  the lease's token
-- ARGV[2]  the acquisition's fence
-- ARGV[3]  the lease's TTL in milliseconds
--
-- Returns  1 when ARGV[1] still holds the name here: the counter is now at
--            least ARGV[2] (it never goes down) and, when raised, lives one
--            TTL longer than the lock key, as acquire.lua leaves it;
--          0 when it does not (the key expired or was taken over): nothing
--            is touched, and this node does not count towards the majority.
--
-- One TTL longer than the lock, not as long as the lock: the watchdog's
-- light renewals (renew_leases.lua) renew the lock key alone, counting on
-- the counter to outlive it by a TTL, as acquire.lua and every full
-- renewal leave it. A counter that expired with the lock's first TTL would
-- be gone while the name is held, and the next acquisition on this node
-- would seed it from the clock again: the very case this script exists to
-- prevent.
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local f = tonumber(redis.call('GET', KEYS[2]) or '0')
if f < tonumber(ARGV[2]) then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    redis.call('SET', KEYS[2], ARGV[2], 'PX', left + tonumber(ARGV[3]))
  else
    redis.call('SET', KEYS[2], ARGV[2], 'KEEPTTL')
  end
end
return 1
