-- Describe the lock without changing it.
-- Keys: lock, holds (a re-entrant lease's), counter (fencing).
-- Returns {the lease or false (free), its remaining TTL in ms, the last
-- fencing token or false, the re-entrant lease's holds (0 for another
-- lock)}.
local v, last = records(lock, counter)
local count = 0
if v and string.byte(v, 1) == 42 then
  count = redis.call('HLEN', holds)
end
return {v or false, v and redis.call('PTTL', lock) or -2, last and string.format('%.0f', last) or false, count}
