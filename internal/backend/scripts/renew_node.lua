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
-- Returns  the leases not renewed, or renewed only in part, as a flat list
--          {i, code, ...} in order:
--            0   the name is held by another token or kind;
--           -1   it is free (its key was deleted, or expired);
--           -2   this call could not tell: reaching its key raised an
--                error (this node does not serve its slot, which moved
--                since the caller looked; or the key is missing from a
--                slot this node is MIGRATING, which Redis refuses a script
--                to touch; or any other error). The outcome is unknown:
--                the caller renews it again on its own;
--           -3   the lease was renewed, but its counter could not be
--                refreshed here (the counter alone was moved out of a
--                MIGRATING slot): the caller refreshes the counter
--                through a command that follows the slot (ASK).
--          An empty list: every lease was renewed.
--          A -1 for a lease is no proof: while the slot migrates, a call
--          redirected by ASK runs on the importing node, where a key not
--          yet moved reads as missing. The caller confirms each -1 and -2
--          with a call of this script for that lease alone, whose one
--          declared key Redis routes (MOVED, ASK) and checks.
-- Each lease is renewed as renew_leases.lua renews it: PEXPIRE ... GT (S8),
-- a listed counter twice the TTL unless it has longer (PEXPIRE ... GT).
-- Every command on a lease's keys is a pcall: only the first lease's key is
-- declared, so Redis checks the others' slots only when the script reaches
-- them, and an error there (redis.call would raise it) must not end the
-- script: the leases before it would be renewed and those after not, and
-- the caller, with no answer for any, would retry every one until lost.
-- GET of a key of another kind is an error reply: another kind holds it.
local ttl = ARGV[1]
local n = tonumber(ARGV[2])
local counter_ttl = 2 * tonumber(ttl)
local failed = {}
local function fail(i, code)
  failed[#failed + 1] = i
  failed[#failed + 1] = code
end
local function raised(reply)
  return type(reply) == 'table' and reply.err ~= nil
end
-- c walks the listed counters alongside the leases: ARGV[c] is the next
-- one's key, and of is the lease it belongs to (nil past the last).
local c = 3 + 2 * n + 1
local of = tonumber(ARGV[c + 1])
for i = 1, n do
  local key = ARGV[2 + i]
  local v = redis.pcall('GET', key)
  if v == ARGV[2 + n + i] then
    if raised(redis.pcall('PEXPIRE', key, ttl, 'GT')) then
      fail(i, -2)
    elseif i == of and raised(redis.pcall('PEXPIRE', ARGV[c], counter_ttl, 'GT')) then
      fail(i, -3)
    end
  elseif v == false then
    fail(i, -1)
  elseif raised(v) and not string.find(v.err, 'WRONGTYPE', 1, true) then
    fail(i, -2)
  else
    fail(i, 0)
  end
  if i == of then
    c = c + 2
    of = tonumber(ARGV[c + 1])
  end
end
return failed
