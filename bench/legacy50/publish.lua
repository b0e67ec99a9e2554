-- publish.lua: how release.lua, abandon.lua, leave.lua and downgrade.lua
-- (through letgo.lua's wake) tell a name's waiters, on one server or a
-- Sentinel group: classic pub/sub, heard by SUBSCRIBE (lease/notify.go).
-- internal/backend prepends this file, or spublish.lua on a Cluster, to
-- each script that prepends letgo.lua; it defines publish() and runs
-- nothing.

-- publish sends 'released' on channel, the name's P{N}:released.
local function publish(channel)
  redis.call('PUBLISH', channel, 'released')
end
