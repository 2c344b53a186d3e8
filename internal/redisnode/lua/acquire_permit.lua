-- Take one of the n permits of a semaphore.
-- KEYS[1] permits (sorted set: owner -> expiry ms), KEYS[2] tokens (hash:
-- owner -> fencing token), KEYS[3] fencing counter, KEYS[4] restart guard
-- marker
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] n, then the token grain and
-- the guard's maximum lease as one (see token.lua)
-- Returns the token (> 0), or minus the time until the first permit
-- expires, or until the restart guard lets grants through, in ms (at
-- least 1).
local owner, ttl = ARGV[1], tonumber(ARGV[2])
local us, now = clock()
drop_expired(KEYS[1], KEYS[2], now)
local again = regrant(KEYS[1], KEYS[2], owner, ttl, now)
if again then
  return again
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return -math.max(1, tonumber(first[2]) - now)
end
return grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4], owner, ttl, us, now)
