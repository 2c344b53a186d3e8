-- How long the restart guard still holds back new grants of a key (see
-- token.lua), without changing anything.
-- Keys: counter (fencing), marker (the restart guard's). Argument: maxttl
-- (the guard's maximum lease, ms). Returns the time left in ms, 0 if none.
local lock = string.sub(counter, 1, -7)
if redis.call('EXISTS', counter, lock, lock .. ':receipt') > 0 then
  return 0
end
local info = redis.call('INFO', 'server')
if redis.call('GET', marker) == string.match(info, 'run_id:(%w+)') then
  return 0
end
local up = (tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) - 1) * 1000
return math.max(0, tonumber(maxttl) - up)
