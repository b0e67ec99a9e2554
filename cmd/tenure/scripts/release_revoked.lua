-- release_revoked.lua: a revoked holder confirms that its work is dead
-- (docs/design.md, "A forced release"). A "tenure run" or "tenure elect"
-- that lost its lease runs it once its command's process group is gone:
-- it takes its token out of the revocation marker that "tenure release
-- --force" left (release_force.lua), and the last token out deletes the
-- marker and tells the waiters, who may take the name at once instead of
-- waiting out the old TTL. cmd/tenure prepends publish.lua, or
-- spublish.lua on a Cluster (backend.PublishLua), which defines publish().
--
-- KEYS[1]  the name's key, P{N}
-- ARGV[1]  the name's release channel, P{N}:released
-- ARGV[2]  the confirming holder's token (a lease's or a permit's)
-- ARGV[3]  the marker's first line, internal/keys.RevokedPrefix
--
-- Returns  1 when ARGV[2] was the marker's last token: the marker is deleted
--            and a message published;
--          2 when ARGV[2] was taken out and other holders have yet to
--            confirm (the marker keeps its TTL);
--          0 when KEYS[1] holds no marker with ARGV[2] (nothing revoked
--            this holder, or it confirmed already): nothing changes.
-- pcall: GET of a key of another kind is an error reply, simply "no marker".
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' or string.sub(v, 1, #ARGV[3]) ~= ARGV[3] then
  return 0
end
local rest = string.sub(v, #ARGV[3] + 1)
local kind, left, found = nil, {}, false
for line in string.gmatch(rest, '[^\n]+') do
  if kind == nil then
    kind = line
  elseif line == ARGV[2] and not found then
    found = true
  else
    left[#left + 1] = line
  end
end
if not found then
  return 0
end
if #left == 0 then
  redis.call('DEL', KEYS[1])
  publish(ARGV[1])
  return 1
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  table.insert(left, 1, ARGV[3] .. kind)
  redis.call('SET', KEYS[1], table.concat(left, '\n'), 'PX', ttl)
end
return 2
