-- renew.lua: compare-and-PEXPIRE, the watchdog's renewal.
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  the fencing counter, P{N}:fence
-- KEYS[3]  for a semaphore's permit only: P{N}:permits (permit.lua)
-- ARGV[1]  a lease's token, a reentrant lock's owner, or a permit's token
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  'h' for a reentrant lock (a hash of owner -> count), 'z' for a
--          semaphore's permit (a sorted set of token -> expiry in server
--          ms, permit.lua), '' for a lease
-- ARGV[4]  for a permit: k, how many permits the token holds (permit.lua's
--          ARGV[6]); absent for 1. All k are renewed, or dropped, together
--
-- Returns  1 when ARGV[1] still holds the name: its remaining TTL is now at
--            least ARGV[2] ms (never shortened, so a late or repeated renewal
--            with a smaller TTL cannot cut it short: safety property S8), and
--            the fencing counter one TTL longer than the lock key (a
--            permit's: as long as the set);
--          0 when the name is held by another token, owner or kind;
--         -1 when the name is free: its key was deleted, or expired (for a
--            permit: the token holds none, or one past its expiry, which
--            is dropped: another request may count it free already).
-- A permit is held while its score is ahead of the server's clock; a
-- renewal sets it to now + TTL when that is later (S8 again), and the set's
-- TTL to that when it is later: the set lives as long as its latest permit
-- (settle() is letgo.lua's, prepended to this script).
-- pcall: GET, HEXISTS or ZSCORE on a key of another kind is an error reply,
-- which is simply "not this holder".
if ARGV[3] == 'z' then
  local k = tonumber(ARGV[4] or '1')
  local score = redis.pcall('ZSCORE', KEYS[1], ARGV[1])
  if type(score) == 'table' then
    return 0
  end
  local now_ms = server_ms()
  if not score or tonumber(score) <= now_ms then
    if score then
      zrem_permit(KEYS[1], ARGV[1], k)
      redis.call('HDEL', KEYS[3], ARGV[1])
      settle(KEYS[1], KEYS[3], now_ms)
    end
    return -1
  end
  local until_ms = now_ms + tonumber(ARGV[2])
  if until_ms > tonumber(score) then
    redis.call('ZADD', KEYS[1], until_ms, ARGV[1])
    for i = 2, k do
      redis.call('ZADD', KEYS[1], until_ms, ARGV[1] .. '#' .. i)
    end
  end
  local left = redis.call('PTTL', KEYS[1])
  if left < tonumber(ARGV[2]) then
    left = ARGV[2]
    redis.call('PEXPIRE', KEYS[1], left)
  end
  redis.call('PEXPIRE', KEYS[3], left)
  redis.call('PEXPIRE', KEYS[2], left)
  return 1
elseif ARGV[3] == 'h' then
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
-- The counter must outlive no hold by more than a TTL (S6), and a re-entry
-- (and election's reader) reads it while the name is held. It gets one TTL
-- more than the lock key, as renew_leases.lua gives it, so that the
-- watchdog's renewals of a lease that follow this one (an Extend, or a
-- renewal on a server without batching) may leave it be for a TTL. A
-- counter gone missing is re-seeded from the clock by the next acquisition
-- (acquire.lua), so PEXPIRE of a missing key is no error.
redis.call('PEXPIRE', KEYS[2], left + tonumber(ARGV[2]))
return 1
