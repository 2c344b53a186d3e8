-- How long the restart guard still holds back new grants of a key (see
-- token.lua), without changing anything.
-- Keys: counter (fencing), marker (the restart guard's). Argument: guard
-- ("maxttl" or "maxttl:durable": the guard's maximum lease in ms, and
-- whether the servers persist every write). Returns the time left in ms,
-- 0 if none.
local lock = string.sub(counter, 1, -7)
if redis.call('EXISTS', counter, lock) > 0 then
  return 0
end
local maxttl, durable = string.match(guard, '^(%d+):?(%d*)$')
local info = redis.call('INFO', 'server')
local seen = redis.call('GET', marker)
if seen == string.match(info, 'run_id:(%w+)') then
  return 0
end
if seen and durable == '1' and string.find(redis.call('INFO', 'persistence'), 'aof_enabled:1', 1, true) then
  return 0
end
local up = (tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) - 1) * 1000
return math.max(0, tonumber(maxttl) - up)
