-- release_force.lua: "tenure release --force": a name taken from whatever
-- holds it, and a word to its holders and waiters. cmd/tenure prepends
-- publish.lua, or spublish.lua on a Cluster (backend.PublishLua), which
-- defines publish().
--
-- By default the holder is revoked, not deleted (docs/design.md, "A forced
-- release"): the key's value becomes a revocation marker (internal/keys:
-- RevokedPrefix) that keeps the old holder's TTL. Every acquisition sees
-- the name held until the marker goes (SET NX fails, a permit finds another
-- kind), and every renewal of the old holder fails (its token is no longer
-- the value), so the holder learns of its loss, stops its work, and once
-- that is dead deletes the marker (release_revoked.lua); a holder that
-- never answers leaves the name barred until its TTL runs out. Safety
-- property S9 holds: the next holder never runs beside the old one's work.
-- With ARGV[2] = 'now' the key is deleted at once, as before revocations
-- existed: the next holder may then run beside the old one's work.
--
-- KEYS[1]  the name's key, P{N}: a lease (a string), a reentrant lock (a
--          hash), permits (a sorted set), or a key tenure did not write
-- KEYS[2]  the name's fencing counter, P{N}:fence, read and kept: the next
--          holder's fence is still larger than every earlier one
-- KEYS[3]  a semaphore's fences of its permits, P{N}:permits, deleted with
--          the permits (a revoked permit's fence is no longer needed)
-- ARGV[1]  the name's release channel, P{N}:released
-- ARGV[2]  'revoke' (the default: leave a marker) or 'now' (delete)
-- ARGV[3]  the marker's first line, internal/keys.RevokedPrefix
--
-- Returns  {'none'} when KEYS[1] does not exist (nothing is removed, nothing
--            published);
--          {'revoked', pttl, fence} when KEYS[1] already holds a marker and
--            ARGV[2] is 'revoke': nothing changes (pttl is the marker's);
--          else {type, pttl, fence, owners, done}: KEYS[1]'s type and
--            remaining TTL in ms (-1 without one) before it was replaced,
--            KEYS[2]'s value ('0' when absent), what held it (a lease's
--            value, its token, of which only the holder identity is shown; a
--            reentrant lock's owner/count pairs; the permits' tokens; {} for
--            another type), and done: 'revoked' when a marker now holds the
--            name for pttl ms, 'deleted' when the key is gone (ARGV[2] 'now',
--            a marker deleted with 'now', a key tenure did not write, or one
--            without a TTL, which a marker would bar for ever).
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then return {t} end
local ttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2]) or '0'
local owners = {}
if t == 'hash' then owners = redis.call('HGETALL', KEYS[1]) end
if t == 'string' then
  owners = {redis.call('GET', KEYS[1])}
  if string.sub(owners[1], 1, #ARGV[3]) == ARGV[3] then
    if ARGV[2] ~= 'now' then
      return {'revoked', ttl, fence}
    end
    t, owners = 'revoked', {}
  end
end
if t == 'zset' then owners = redis.call('ZRANGE', KEYS[1], 0, -1) end
local revoke = ARGV[2] ~= 'now' and ttl > 0 and (t == 'string' or t == 'hash' or t == 'zset')
if revoke then
  -- One line per holder that may confirm: a lease's token, a permit's
  -- token (not the token#i members of a hold of k, which have no fence),
  -- a reentrant lock's owners (which never confirm: the TTL frees it).
  local lines = {ARGV[3] .. t}
  if t == 'string' then
    lines[2] = owners[1]
  elseif t == 'hash' then
    for i = 1, #owners, 2 do lines[#lines + 1] = owners[i] end
  else
    for _, m in ipairs(owners) do
      if redis.call('HEXISTS', KEYS[3], m) == 1 then lines[#lines + 1] = m end
    end
  end
  if t == 'zset' then redis.call('DEL', KEYS[3]) end
  redis.call('SET', KEYS[1], table.concat(lines, '\n'), 'PX', ttl)
else
  if t == 'zset' then redis.call('DEL', KEYS[3]) end
  redis.call('DEL', KEYS[1])
end
publish(ARGV[1])
local done = 'deleted'
if revoke then done = 'revoked' end
return {t, ttl, fence, owners, done}
