-- End every holding of a lock, whoever holds it (the lock and its re-entrant
-- holds, the readers, the permits), and wake the waiters. The fencing
-- counter, the fair queue and a writer's claim stay.
-- Keys: lock, holds (a re-entrant lease's), readers, rtokens, permits,
-- tokens, queue and places (the fair line). Argument: channel.
-- Returns how many of the holding keys existed.
local v = redis.call('GET', lock)
local n = 0
if v and not is_free(v) then
  -- The lease's token stays in a free record that names no call (see
  -- issue in token.lua).
  redis.call('SET', lock, free_record('', lease_text(v)), 'PX', COUNTER_LIFE)
  n = 1
end
n = n + redis.call('DEL', holds, readers, rtokens, permits, tokens)
if n > 0 then
  redis.call('PUBLISH', channel, live_head(queue, places) or '')
end
return n
