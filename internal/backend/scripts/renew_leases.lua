-- renew_leases.lua: compare-and-PEXPIRE of many leases in one call: the
-- watchdog's renewal of plain leases, batched so that Redis pays for one
-- script call per batch rather than one per lease (renew.lua renews one
-- item of any kind, and is what Extend, reentrant locks and permits use).
--
-- KEYS[2i-1]  lease i's key, P{N}
-- KEYS[2i]    lease i's fencing counter, P{N}:fence
-- ARGV[1]     the TTL in milliseconds, the same for every lease of the call
-- ARGV[1+i]   lease i's token
--
-- Returns  the leases not renewed, as a flat list {i, code, ...} in order:
--            code 0 when the name is held by another token or kind, -1
--            when it is free (its key was deleted, or expired). An empty
--            list: every lease was renewed.
-- A lease still held gets the TTL ARGV[1] unless its key has a longer one
-- already (PEXPIRE ... GT: a renewal never shortens a lease, safety
-- property S8), and its counter gets ARGV[1] ms, so that a held name has
-- its counter (one left without a TTL by an older version gets one: S6). PEXPIRE's GT needs
-- Redis 7.0: on an older server the call fails whole, and the backend
-- renews with renew.lua instead. Every key of one call is on one node (in
-- a Cluster, in one slot). pcall: GET of another kind is an error reply,
-- which is simply "not this holder".
local ttl = ARGV[1]
local failed = {}
for i = 1, #KEYS / 2 do
  local key = KEYS[2 * i - 1]
  local v = redis.pcall('GET', key)
  if v == ARGV[i + 1] then
    redis.call('PEXPIRE', key, ttl, 'GT')
    redis.call('PEXPIRE', KEYS[2 * i], ttl)
  else
    failed[#failed + 1] = i
    failed[#failed + 1] = v == false and -1 or 0
  end
end
return failed
