-- release_force.lua: "tenure release --force": a name's lock deleted,
-- whatever holds it, and a word to its waiters, at once. cmd/tenure
-- prepends publish.lua, or spublish.lua on a Cluster (backend.PublishLua),
-- which defines publish().
--
-- KEYS[1]  the name's key, P{N}: a lease (a string), a reentrant lock (a
--          hash), permits (a sorted set), or a key tenure did not write
-- KEYS[2]  the name's fencing counter, P{N}:fence, read and kept: the next
--          holder's fence is still larger than every earlier one
-- KEYS[3]  a semaphore's fences of its permits, P{N}:permits, deleted with
--          the permits
-- ARGV[1]  the name's release channel, P{N}:released
--
-- Returns  {'none'} when KEYS[1] does not exist (nothing is removed, nothing
--            published);
--          else {type, pttl, fence, owners}: KEYS[1]'s type and remaining TTL
--            in ms (-1 without one) before it was deleted, KEYS[2]'s value
--            ('0' when absent), and what held it: a lease's value (its
--            token, of which only the holder identity is shown), a reentrant
--            lock's owner/count pairs, the permits' tokens; {} for another
--            type.
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then return {t} end
local ttl = redis.call('PTTL', KEYS[1])
local owners = {}
if t == 'hash' then owners = redis.call('HGETALL', KEYS[1]) end
if t == 'string' then owners = {redis.call('GET', KEYS[1])} end
if t == 'zset' then
  owners = redis.call('ZRANGE', KEYS[1], 0, -1)
  redis.call('DEL', KEYS[3])
end
redis.call('DEL', KEYS[1])
publish(ARGV[1])
return {t, ttl, redis.call('GET', KEYS[2]) or '0', owners}
