-- Describe the lock without changing it.
-- Keys: lock, holds (a re-entrant lease's), counter (fencing).
-- Returns {value or false, remaining TTL in ms, last fencing token or
-- false, the re-entrant lease's holds (0 for another lock)}.
local v = redis.call('GET', lock)
local count = 0
if v and string.byte(v, 1) == 42 then
  count = redis.call('HLEN', holds)
end
local _, last = records(lock, counter)
return {v, redis.call('PTTL', lock), last and string.format('%.0f', last) or false, count}
