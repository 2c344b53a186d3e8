-- How long the restart guard still holds back new grants of a key (see
-- token.lua), without changing anything.
-- KEYS[1] fencing counter, KEYS[2] restart guard marker; ARGV[1] the
-- guard's maximum lease in ms. Returns the time left in ms, 0 if none.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local info = redis.call('INFO', 'server')
if redis.call('GET', KEYS[2]) == string.match(info, 'run_id:(%w+)') then
  return 0
end
local up = (tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) - 1) * 1000
return math.max(0, tonumber(ARGV[1]) - up)
