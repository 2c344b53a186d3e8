-- Extend the lock if, and only if, the owner holds it.
-- KEYS[1] lock key, KEYS[2] a re-entrant lease's holds (see
-- acquire_reentrant.lua); ARGV[1] owner, ARGV[2] TTL in ms
-- Returns 1 when extended, 0 when the owner did not hold it.
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. '\n'
if v and string.sub(v, 1, #prefix) == prefix then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if v and string.byte(v, 1) == 42 and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  -- A hold of a re-entrant lease renews it for every hold, never cutting
  -- what another hold was granted.
  local ttl = tonumber(ARGV[2])
  if redis.call('HLEN', KEYS[2]) > 1 then
    ttl = math.max(ttl, redis.call('PTTL', KEYS[1]))
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  return 1
end
return 0
