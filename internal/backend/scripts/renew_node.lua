#!lua flags=allow-cross-slot-keys
-- renew_node.lua: renew_leases.lua for a Redis Cluster, where the leases of
-- one call share a node rather than a slot. A Cluster refuses a call whose
-- declared keys span slots (CROSSSLOT), and a Cluster of 16,384 slots holds
-- few leases a slot: grouped by slot, a call renewed about one lease, and
-- batching saved nothing. So only the first lease's key is declared (it
-- routes the call to its node) and the others come as arguments, which the
-- allow-cross-slot-keys flag (Redis 7.0) lets a script reach on the node
-- that serves them.
--
-- KEYS[1]        lease 1's key, P{N}
-- ARGV[1]        the TTL in milliseconds, the same for every lease of the call
-- ARGV[2]        n, the number of leases
-- ARGV[2+i]      lease i's key, P{N}, for i = 1 .. n (ARGV[3] is KEYS[1])
-- ARGV[2+n+i]    lease i's token
-- ARGV[3+2n]     m, the number of counters to refresh
-- ARGV[3+2n+2j-1], ARGV[3+2n+2j]
--                counter j's key, P{N}:fence, and the lease i it belongs to,
--                in increasing order of i
--
-- Returns  the leases not renewed, as a flat list {i, code, ...} in order:
--            code 0 when the name is held by another token or kind, -1
--            when it is free (its key was deleted, or expired), -2 when
--            this node does not serve its key (its slot moved since the
--            caller looked: the outcome is unknown, and the caller tries
--            again). An empty list: every lease was renewed.
--          A -1 for a lease is no proof: while the slot migrates, a call
--          redirected by ASK runs on the importing node, where a key not
--          yet moved reads as missing. The caller confirms each with
--          renew.lua, whose declared keys Redis checks (ASK, TRYAGAIN).
-- Each lease is renewed as renew_leases.lua renews it: PEXPIRE ... GT (S8),
-- a listed counter twice the TTL unless it has longer (PEXPIRE ... GT). pcall: GET of another kind,
-- or of a key another node serves, is an error reply.
local ttl = ARGV[1]
local n = tonumber(ARGV[2])
local counter_ttl = 2 * tonumber(ttl)
local failed = {}
-- c walks the listed counters alongside the leases: ARGV[c] is the next
-- one's key, and of is the lease it belongs to (nil past the last).
local c = 3 + 2 * n + 1
local of = tonumber(ARGV[c + 1])
for i = 1, n do
  local key = ARGV[2 + i]
  local v = redis.pcall('GET', key)
  if v == ARGV[2 + n + i] then
    redis.call('PEXPIRE', key, ttl, 'GT')
    if i == of then
      redis.call('PEXPIRE', ARGV[c], counter_ttl, 'GT')
    end
  else
    local code = 0
    if v == false then
      code = -1
    elseif type(v) == 'table' and v.err and string.find(v.err, 'non local', 1, true) then
      code = -2
    end
    failed[#failed + 1] = i
    failed[#failed + 1] = code
  end
  if i == of then
    c = c + 2
    of = tonumber(ARGV[c + 1])
  end
end
return failed
