-- fence.lua: the fencing token of a new hold, shared by acquire.lua and
-- permit.lua (internal/backend prepends this file to each of them; it
-- defines a function and runs nothing).
--
-- fence(counter_key, ttl) returns max(counter + 1, server TIME in us) and
-- writes it back to counter_key with a TTL of ttl ms; or, when the counter
-- holds no integer below 2^53, an error reply (a table), having left the
-- counter as it was. See acquire.lua for why the clock term makes fences
-- increase across restarts, snapshot rollbacks and failovers (S5).

-- fence writes the clock and reads the counter it replaces in one SET ...
-- GET, since the clock is nearly always the larger; on the rare paths (the
-- counter is ahead, or broken) it writes again, so that nothing is lost.
local function fence(counter_key, ttl)
  local now = redis.call('TIME')
  local f = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local counter = redis.pcall('SET', counter_key, string.format('%.0f', f), 'PX', ttl, 'GET')
  if type(counter) == 'table' then
    return counter -- another type: SET ... GET touched nothing
  end
  if not counter then
    return f
  end
  local c = tonumber(counter)
  local broken
  if not c or c ~= math.floor(c) then
    broken = 'is not an integer'
  elseif c >= 9007199254740991 then
    -- Past 2^53 a double no longer holds every integer: c + 1 could
    -- equal c.
    broken = 'would overflow'
  end
  if broken then
    redis.call('SET', counter_key, counter, 'KEEPTTL')
    return redis.error_reply('ERR fencing counter ' .. counter_key .. ' ' .. broken)
  end
  if c + 1 > f then
    f = c + 1
    redis.call('SET', counter_key, string.format('%.0f', f), 'PX', ttl)
  end
  return f
end

