-- redisson_publish.lua: prepended to redisson_revoke.lua and
-- redisson_confirm.lua; it defines publish() and runs nothing. It is
-- package redisson's: the caller passes SPUBLISH on a Cluster (Redisson's
-- default there, whose Go waiters listen to both kinds), PUBLISH
-- elsewhere; a server without SPUBLISH (older than 7.0, which also lacks
-- redis.REDIS_VERSION_NUM) gets PUBLISH, so that a script never fails half
-- way with the hash changed and nobody told.

-- publish sends message on channel with cmd, 'PUBLISH' or 'SPUBLISH'.
local function publish(cmd, channel, message)
  if cmd == 'SPUBLISH' and not redis.REDIS_VERSION_NUM then
    cmd = 'PUBLISH'
  end
  redis.call(cmd, channel, message)
end
