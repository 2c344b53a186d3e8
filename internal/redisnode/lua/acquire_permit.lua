-- Take one of the n permits of a semaphore.
-- KEYS[1] permits (sorted set: owner -> expiry ms), KEYS[2] tokens (hash:
-- owner -> fencing token, and n under LIMIT), KEYS[3] fencing counter,
-- KEYS[4] restart guard marker
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] n, then the token grain and
-- the guard's maximum lease as one (see token.lua)
-- Returns the token (> 0), or minus the time until the first permit
-- expires, in ms (at least 1), or the restart guard's refusal "guard MS"
-- (see token.lua); or mismatch's reply (see kind.lua) for a semaphore of another
-- n or a key held as another family.
local owner, ttl, n = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local us, now = clock()
drop_expired(KEYS[1], KEYS[2], now)
local again = regrant(KEYS[1], KEYS[2], owner, ttl, now)
if again then
  return again
end
local held, limit = redis.call('ZCARD', KEYS[1]), nil
if held > 0 then
  limit = redis.call('HGET', KEYS[2], LIMIT)
  if limit and limit ~= n then
    return mismatch('permit', limit)
  end
else
  local lock, readers = siblings(KEYS[3])
  if redis.call('EXISTS', lock, readers) > 0 then
    local v = redis.call('GET', lock)
    if v then
      return mismatch(lock_family(v))
    end
    if live(readers, now) then
      return mismatch('rw')
    end
  end
end
if held >= tonumber(n) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return -math.max(1, tonumber(first[2]) - now)
end
local fence = grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4], owner, ttl, us, now)
if type(fence) == 'number' and not limit then
  redis.call('HSET', KEYS[2], LIMIT, n)
end
return fence
