-- spublish.lua: publish.lua for a Redis Cluster. A Cluster carries a
-- classic PUBLISH over its bus to every node, so that every node pays for
-- every release; a sharded one (SPUBLISH, Redis 7.0 and later) reaches
-- only the nodes of the channel's slot, whose subscribers hear it with
-- SSUBSCRIBE (lease/notify_shard.go). P{N}:released shares the name's hash
-- tag, so it is in the slot of the script's keys. A server older than 7.0
-- has neither SPUBLISH nor redis.REDIS_VERSION_NUM (both came with 7.0):
-- there the message is a classic one, and a subscriber whose SSUBSCRIBE
-- that server refused listens with SUBSCRIBE. It defines publish() and
-- runs nothing.

-- publish sends 'released' on channel, the name's P{N}:released.
local function publish(channel)
  if redis.REDIS_VERSION_NUM then
    redis.call('SPUBLISH', channel, 'released')
  else
    redis.call('PUBLISH', channel, 'released')
  end
end
