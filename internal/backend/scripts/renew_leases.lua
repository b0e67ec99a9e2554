-- renew_leases.lua: compare-and-PEXPIRE of many leases in one call: the
-- watchdog's renewal of plain leases, batched so that Redis pays for one
-- script call per batch rather than one per lease (renew.lua renews one
-- item of any kind, and is what Extend, reentrant locks and permits use).
--
-- KEYS[i]      lease i's key, P{N}, for i = 1 .. ARGV[2]
-- KEYS[n+j]    the fencing counter, P{N}:fence, of the lease ARGV[2+n+j]
--              names, for the leases whose counter this call refreshes
-- ARGV[1]      the TTL in milliseconds, the same for every lease of the call
-- ARGV[2]      n, the number of leases
-- ARGV[2+i]    lease i's token
-- ARGV[2+n+j]  i, the lease whose counter is KEYS[n+j], in increasing order
--
-- Returns  the leases not renewed, as a flat list {i, code, ...} in order:
--            code 0 when the name is held by another token or kind, -1
--            when it is free (its key was deleted, or expired). An empty
--            list: every lease was renewed.
-- A lease still held gets the TTL ARGV[1] unless its key has a longer one
-- already (PEXPIRE ... GT: a renewal never shortens a lease, safety
-- property S8). A counter listed gets twice ARGV[1] unless it has a longer
-- TTL already (PEXPIRE ... GT: an Extend gives it one TTL past the key's
-- longer TTL, renew.lua), when its lease was renewed: one TTL past its
-- lease's key, which the renewal just gave ARGV[1] or left longer. One
-- call, without reading the key's TTL back, because touching the counter
-- is most of what a renewal costs beyond its own key. The others are left
-- alone, which is what makes a renewal cheap: one key touched instead of
-- two. The watchdog lists a lease's counter at
-- least once a TTL (watchdog.Renewal.Light): a counter given 2 TTLs at the
-- acquisition or at a listed renewal outlives every renewal sent within a
-- TTL after it, so a held name keeps its counter (election and the tenure
-- command read it), and the counter outlives the lock by at most one TTL
-- (S6). A renewal the server runs after its sender gave it up may outlive
-- the counter; the fence does not depend on it (S5 re-seeds from the
-- clock). PEXPIRE's GT needs Redis 7.0: on an older server the call fails
-- whole, and the backend renews with renew.lua instead. Every key of one
-- call is on one node (in a Cluster, in one slot). pcall: GET of another
-- kind is an error reply, which is simply "not this holder".
local ttl = ARGV[1]
local n = tonumber(ARGV[2])
local counter_ttl = 2 * tonumber(ttl)
local failed = {}
-- j walks the listed counters alongside the leases: KEYS[j] is the next
-- one, and of is the lease it belongs to (nil past the last).
local j = n + 1
local of = tonumber(ARGV[j + 2])
for i = 1, n do
  local key = KEYS[i]
  local v = redis.pcall('GET', key)
  if v == ARGV[i + 2] then
    redis.call('PEXPIRE', key, ttl, 'GT')
    if i == of then
      redis.call('PEXPIRE', KEYS[j], counter_ttl, 'GT')
    end
  else
    failed[#failed + 1] = i
    failed[#failed + 1] = v == false and -1 or 0
  end
  if i == of then
    j = j + 1
    of = tonumber(ARGV[j + 2])
  end
end
return failed
