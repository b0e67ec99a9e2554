-- record_write.lua: writes an election's leader record while the leader's
-- lease holds the name, and announces a new term.
--
-- KEYS[1]  the lease key, P{N}
-- KEYS[2]  the leader record, P{N}:leader (a hash of identity, fence and
--          lease)
-- ARGV[1]  the lease's token: the record is written only while P{N} holds
--          exactly it, so a leader that lost the name (or a server that
--          never had the lease: one server of a quorum, or one the lease
--          does not live on) writes nothing
-- ARGV[2]  the leader's identity
-- ARGV[3]  the term's fence
-- ARGV[4]  the record's TTL in milliseconds (the leadership TTL)
-- ARGV[5]  the channel P{N}:leader:changed to publish the fence on when it
--          is new here, or '' to publish nothing (a Cluster: the caller
--          sends SPUBLISH itself, which an older server refuses)
-- ARGV[6]  a digest of the lease's token (never the token itself), by which
--          readers tell that the record is the lease's that holds P{N}
--
-- Returns  0 when P{N} does not hold ARGV[1]: nothing was written;
--          1 when the record was written and already had this fence (a
--            refresh);
--          2 when the record was written with a fence it did not have (a
--            new term here), and published on ARGV[5] if given.
-- pcall: GET of a key of another kind (a reentrant lock, permits) is an
-- error reply, which is simply "not this lease".
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' or v ~= ARGV[1] then
  return 0
end
local old = redis.call('HGET', KEYS[2], 'fence')
redis.call('HSET', KEYS[2], 'identity', ARGV[2], 'fence', ARGV[3], 'lease', ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
if old == ARGV[3] then
  return 1
end
if ARGV[5] ~= '' then
  redis.call('PUBLISH', ARGV[5], ARGV[3])
end
return 2
