-- Take one of the n permits of a semaphore.
-- Keys: permits (sorted set: owner -> expiry ms), tokens (hash: owner ->
-- fencing token, and n under LIMIT), counter (fencing), marker (the
-- restart guard's).
-- Arguments: owner, ttl (ms), n, guard (see token.lua).
-- Returns the token (> 0), or minus the time until the first permit
-- expires, in ms (at least 1), or the restart guard's refusal "guard MS"
-- (see token.lua); or mismatch's reply (see kind.lua) for a semaphore of another
-- n or a key held as another family.
ttl = tonumber(ttl)
local us, now = clock()
drop_expired(permits, tokens, now)
local again = regrant(permits, tokens, owner, ttl, now)
if again then
  return again
end
local held, limit = redis.call('ZCARD', permits), nil
if held > 0 then
  limit = redis.call('HGET', tokens, LIMIT)
  if limit and limit ~= n then
    return mismatch('permit', limit)
  end
else
  local lock, readers = siblings(counter)
  if redis.call('EXISTS', lock, readers) > 0 then
    local v = redis.call('GET', lock)
    if v and not is_free(v) then
      return mismatch(lock_family(v))
    end
    if live(readers, now) then
      return mismatch('rw')
    end
  end
end
if held >= tonumber(n) then
  local first = redis.call('ZRANGE', permits, 0, 0, 'WITHSCORES')
  return -math.max(1, tonumber(first[2]) - now)
end
local fence = grant(permits, tokens, counter, marker, owner, ttl, us, now, guard)
if type(fence) == 'number' and not limit then
  redis.call('HSET', tokens, LIMIT, n)
end
return fence
