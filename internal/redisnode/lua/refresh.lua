-- Extend the lock if, and only if, the owner holds it.
-- Keys: lock, holds (a re-entrant lease's, see acquire_reentrant.lua).
-- Arguments: owner, ttl (ms).
-- Returns 1 when extended, 0 when the owner did not hold it.
local v = redis.call('GET', lock)
local prefix = owner .. '\n'
if v and string.sub(v, 1, #prefix) == prefix then
  redis.call('PEXPIRE', lock, ttl)
  return 1
end
if v and string.byte(v, 1) == 42 and redis.call('HEXISTS', holds, owner) == 1 then
  -- A hold of a re-entrant lease renews it for every hold, never cutting
  -- what another hold was granted.
  ttl = tonumber(ttl)
  if redis.call('HLEN', holds) > 1 then
    ttl = math.max(ttl, redis.call('PTTL', lock))
  end
  redis.call('PEXPIRE', lock, ttl)
  redis.call('PEXPIRE', holds, ttl)
  return 1
end
return 0
