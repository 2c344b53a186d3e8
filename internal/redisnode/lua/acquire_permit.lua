-- Take one of the n permits of a semaphore.
-- KEYS[1] permits (sorted set: owner -> expiry ms), KEYS[2] tokens (hash:
-- owner -> fencing token), KEYS[3] fencing counter
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] n
-- Returns the token (> 0), or minus the time until the first permit
-- expires, in ms (<= 0).
local owner, ttl = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
drop_expired(KEYS[1], KEYS[2], now)
if redis.call('ZSCORE', KEYS[1], owner) then
  -- A retry of an attempt whose reply was lost: the same grant again.
  redis.call('ZADD', KEYS[1], now + ttl, owner)
  keep_alive(KEYS[1], KEYS[2], now)
  return tonumber(redis.call('HGET', KEYS[2], owner))
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return -math.max(0, tonumber(first[2]) - now)
end
local fence = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[1], now + ttl, owner)
redis.call('HSET', KEYS[2], owner, fence)
keep_alive(KEYS[1], KEYS[2], now)
return fence
