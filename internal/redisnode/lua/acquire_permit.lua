-- Take one of the n permits of a semaphore.
-- KEYS[1] permits (sorted set: owner -> expiry ms), KEYS[2] tokens (hash:
-- owner -> fencing token), KEYS[3] fencing counter
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] n
-- Returns the token (> 0), or minus the time until the first permit
-- expires, in ms (at least 1).
local owner, ttl = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
drop_expired(KEYS[1], KEYS[2], now)
local again = regrant(KEYS[1], KEYS[2], owner, ttl, now)
if again then
  return again
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return -math.max(1, tonumber(first[2]) - now)
end
return grant(KEYS[1], KEYS[2], KEYS[3], owner, ttl, now)
