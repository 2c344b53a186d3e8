-- A fair waiter gives up: leave the queue, release a grant that raced with
-- giving up, and wake the others if the head of the queue moved.
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
if moved then
  redis.call('PUBLISH', ARGV[2], '')
end
return 1
