-- Extend the lock if, and only if, the owner holds it.
-- KEYS[1] lock key; ARGV[1] owner, ARGV[2] TTL in ms
-- Returns 1 when extended, 0 when the owner did not hold it.
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. '\n'
if v and string.sub(v, 1, #prefix) == prefix then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
