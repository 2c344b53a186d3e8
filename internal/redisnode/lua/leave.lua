-- A fair waiter gives up: leave the queue, release a grant that raced with
-- giving up, and, if that moved the head of the queue, tell the next waiter.
-- KEYS[1] lock key, KEYS[2] queue, KEYS[3] places; ARGV[1] owner, ARGV[2] channel
local owner = ARGV[1]
local moved = redis.call('ZRANGE', KEYS[2], 0, 0)[1] == owner
redis.call('ZREM', KEYS[2], owner)
redis.call('HDEL', KEYS[3], owner)
local v = redis.call('GET', KEYS[1])
local prefix = owner .. '\n'
if v and string.sub(v, 1, #prefix) == prefix then
  redis.call('DEL', KEYS[1])
  moved = true
end
if moved and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('PUBLISH', ARGV[2], live_head(KEYS[2], KEYS[3]) or '')
end
return 1
