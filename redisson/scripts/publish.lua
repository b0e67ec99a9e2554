-- publish.lua: prepended to every script of package redisson that tells
-- waiters; it defines publish() and runs nothing.
--
-- Redisson (3.22 and later) publishes with SPUBLISH when its client is a
-- Cluster client and the Cluster answers PUBSUB SHARDNUMSUB (Redis 7.0 and
-- later; ShardedSubscriptionMode AUTO), else with PUBLISH. The caller
-- passes the command it chose the same way; a server without SPUBLISH
-- (older than 7.0, which also lacks redis.REDIS_VERSION_NUM) gets PUBLISH
-- instead, for a script that fails half way would leave the lock deleted
-- with nobody told.

-- publish sends message on channel with cmd, 'PUBLISH' or 'SPUBLISH'.
local function publish(cmd, channel, message)
  if cmd == 'SPUBLISH' and not redis.REDIS_VERSION_NUM then
    cmd = 'PUBLISH'
  end
  redis.call(cmd, channel, message)
end
