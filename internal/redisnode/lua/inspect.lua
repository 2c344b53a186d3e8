-- Describe the lock without changing it.
-- KEYS[1] lock key, KEYS[2] a re-entrant lease's holds, KEYS[3] fencing counter
-- Returns {value or false, remaining TTL in ms, last fencing token or
-- false, the re-entrant lease's holds (0 for another lock)}.
local v = redis.call('GET', KEYS[1])
local holds = 0
if v and string.byte(v, 1) == 42 then
  holds = redis.call('HLEN', KEYS[2])
end
return {v, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[3]), holds}
