-- release.lua: compare-and-delete, and a word to the waiters.
--
-- KEYS[1]  the lock key, P{N}; the name's release channel is KEYS[1] ..
--          ':released' (internal/keys: Channel), a channel and not a key
-- KEYS[2]  this release's marker, P{N}:retired:<op>
-- KEYS[3]  for a semaphore's permit: P{N}:permits (permit.lua); for a
--          reentrant lock when ARGV[5] is given: the fencing counter,
--          P{N}:fence
-- ARGV[1]  a lease's token, a reentrant lock's owner, or a permit's token
-- ARGV[2]  how long to remember a release that frees the name, in
--          milliseconds: no longer than the lease's TTL, so that no key of a
--          name outlives its last holder by more than a TTL (S6); '0' for a
--          lease or a permit whose manager asked for no memory
--          (lease.WithReleaseMemory(0)): no marker is written
-- ARGV[3]  absent for a lease; 'z' for a semaphore's permit; for a
--          reentrant lock, how many entries of the owner to take back, '0'
--          for all of them
-- ARGV[4]  for a reentrant lock, how long to remember a release that
--          leaves the owner holding the name (an inner exit), in ms; for a
--          permit, k, how many permits the token holds (permit.lua's
--          ARGV[6]), all released together; absent for 1
-- ARGV[5]  for a reentrant lock, the fence of the hold the release
--          belongs to; absent: not checked
--
-- Returns  1 when ARGV[1] held the name: a lease is deleted; a reentrant
--            lock's owner count goes down, and at zero the owner's field goes,
--            and with the last owner the key. When the name became free a
--            message is published on the release channel (publish() is
--            publish.lua's, or spublish.lua's on a Cluster, prepended).
--            A permit leaves the semaphore's set, and a message is published
--            (a permit is free, whoever else holds one); the set then lives
--            as long as its latest permit left, or goes with the last one
--            (settle() is letgo.lua's, prepended to this script);
--          0 when the name is free or held by another token, owner or kind,
--            or the permit is past its expiry (it is dropped: another request
--            may count it free already).
-- A release is remembered: a copy a client library resends after losing the
-- reply is answered 1 again, and neither reports "not held" for a lease it
-- just released nor takes back a reentrant entry twice. A lease's copy
-- finds the key no longer its own, so the marker is looked up only then;
-- a reentrant exit's copy would find the owner still holding, so it is
-- looked up first. An inner exit is remembered for as long as resends may
-- come, since applying it twice would free the name under its owner; once
-- the name is free, a late copy finds nothing of its owner to take, so a
-- short memory is safe.
-- pcall: GET or HGET on a key of another kind is an error reply, which is
-- simply "not this holder".
-- A lease's release (ARGV[3] absent) is release_lease.lua's, which runs
-- first and has returned.
if ARGV[3] == 'z' then
  local score = redis.pcall('ZSCORE', KEYS[1], ARGV[1])
  if type(score) ~= 'string' then
    return redis.call('EXISTS', KEYS[2])
  end
  zrem_permit(KEYS[1], ARGV[1], tonumber(ARGV[4] or '1'))
  redis.call('HDEL', KEYS[3], ARGV[1])
  local now_ms = server_ms()
  settle(KEYS[1], KEYS[3], now_ms)
  if tonumber(score) <= now_ms then
    return 0
  end
  if ARGV[2] ~= '0' then
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
  end
  publish(KEYS[1] .. ':released')
  return 1
end
-- A reentrant lock's final release names its op after the acquire that
-- took the hold, whose entry mark (acquire.lua's 'e<count>:<fence>') is
-- not a release: the release overwrites it, and a late copy of that acquire
-- is refused from then on.
local done = redis.call('GET', KEYS[2])
if done and string.sub(done, 1, 1) ~= 'e' then
  return 1
end
-- An owner may be shared (a lock's context carries it): its hold can
-- expire and the owner take the name again, a new hold with a new fence,
-- before a release of the old hold arrives (a lock lost to expiry still
-- sends its release; an unanswered exit is sent again). Applied, it would
-- take back the new hold's entries and could free the name under it. The
-- counter holds the current hold's fence while the hold lives (acquire.lua,
-- renewals and reenter.lua keep it at least as long); when it is gone
-- there is no telling, and the release goes on as before.
if ARGV[5] then
  local cur = tonumber(redis.call('GET', KEYS[3]) or '')
  if cur and cur ~= tonumber(ARGV[5]) then
    return 0
  end
end
local count = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(count) ~= 'string' then
  return 0
end
local n = tonumber(ARGV[3])
if n > 0 and tonumber(count) > n then
  redis.call('HINCRBY', KEYS[1], ARGV[1], -n)
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[4])
  return 1
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then
  publish(KEYS[1] .. ':released')
end
return 1
