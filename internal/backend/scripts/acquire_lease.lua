-- acquire_lease.lua: acquire.lua's common case, a barging lease taking a
-- free name with no abandon marker and no queue. internal/backend puts this
-- file first, ahead of fence.lua, queue.lua and acquire.lua, because every
-- `local function` of a script is a closure made at each run of it: this
-- case returns before any is made. So the fence is written here as
-- fence.lua's fence() writes it. KEYS and ARGV are acquire.lua's.
--
-- Returns  the fence, max(counter + 1, server TIME in us) (S5), when it
--          took the name; otherwise nothing, and acquire.lua goes on,
--          knowing what this part did: lease_busy, the EXISTS of the marker
--          and the queue (nil when it did not look); lease_tried, true
--          when its SET NX found the name held; lease_took, true when it
--          took the name but found the counter broken, which acquire.lua's
--          fence() then reports (the name given back).
local lease_busy, lease_tried, lease_took
if (ARGV[3] or '') == '' and (ARGV[4] or '0') == '0' then
  lease_busy = redis.call('EXISTS', KEYS[3], KEYS[4]) > 0
  if not lease_busy then
    if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
      local now = redis.call('TIME')
      local f = tonumber(now[1]) * 1000000 + tonumber(now[2])
      -- Twice the TTL, as acquire.lua gives it.
      local ttl2 = 2 * tonumber(ARGV[2])
      local counter = redis.pcall('SET', KEYS[2], string.format('%.0f', f), 'PX', ttl2, 'GET')
      if not counter then
        return f
      end
      local c = type(counter) == 'string' and tonumber(counter)
      if c and c == math.floor(c) and c < 9007199254740991 then
        if c + 1 > f then
          f = c + 1
          redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', ttl2)
        end
        return f
      end
      -- A broken counter (another type, which SET ... GET left untouched;
      -- not an integer; or about to overflow): put back what it held, and
      -- let acquire.lua's fence() say what is wrong, as for any holder,
      -- and give the name back.
      if type(counter) == 'string' then
        redis.call('SET', KEYS[2], counter, 'KEEPTTL')
      end
      lease_took = true
    else
      lease_tried = true
    end
  end
end
