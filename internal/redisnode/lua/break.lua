-- End every holding of a lock, whoever holds it (the lock and its re-entrant
-- holds, the readers, the permits), and wake the waiters. The fencing
-- counter, the fair queue and a writer's claim stay.
-- KEYS[1] lock key, KEYS[2] a re-entrant lease's holds, KEYS[3] readers,
-- KEYS[4] their tokens, KEYS[5] permits, KEYS[6] their tokens, KEYS[7] fair
-- queue, KEYS[8] fair places
-- ARGV[1] release channel
-- Returns how many of the holding keys existed.
local n = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
if n > 0 then
  redis.call('PUBLISH', ARGV[1], live_head(KEYS[7], KEYS[8]) or '')
end
return n
