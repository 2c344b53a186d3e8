-- A fair waiter gives up: leave the queue, release a grant that raced with
-- giving up, and, if that moved the head of the queue, tell the next waiter.
-- Keys: lock, queue, places. Arguments: owner, channel.
local moved = redis.call('ZRANGE', queue, 0, 0)[1] == owner
redis.call('ZREM', queue, owner)
redis.call('HDEL', places, owner)
local v = redis.call('GET', lock)
local prefix = owner .. '\n'
local free = not v or is_free(v)
if v and string.sub(v, 1, #prefix) == prefix then
  -- The lease's token stays in a free record that names no call (see
  -- issue in token.lua).
  redis.call('SET', lock, free_record('', lease_text(v)), 'PX', COUNTER_LIFE)
  moved, free = true, true
end
if moved and free then
  redis.call('PUBLISH', channel, live_head(queue, places) or '')
end
return 1
