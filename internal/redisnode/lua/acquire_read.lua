-- Take a read-write lock for reading: no writer holds it or waits for it.
-- KEYS as acquire_write.lua; ARGV[1] owner, ARGV[2] TTL in ms, then the
-- token grain and the guard's maximum lease as one (see token.lua)
-- Returns the token (> 0), or minus a retry hint in ms: at least 1 while a
-- writer's lease or claim lasts; the restart guard's refusal "guard MS"
-- (see token.lua); 0
-- (no hint) for a writer key without a TTL; or mismatch's reply (see
-- kind.lua).
local owner, ttl = ARGV[1], tonumber(ARGV[2])
local us, now = clock()
drop_expired(KEYS[3], KEYS[4], now)
local again = regrant(KEYS[3], KEYS[4], owner, ttl, now)
if again then
  return again
end
local v = redis.call('GET', KEYS[1])
if v then
  if not is_writer(v) then
    return mismatch('mutex')
  end
  local writer = redis.call('PTTL', KEYS[1])
  if writer == -1 then
    return 0
  end
  return -math.max(1, writer)
end
if redis.call('ZCARD', KEYS[3]) == 0 then
  local _, _, permits, tokens = siblings(KEYS[2])
  if live(permits, now) then
    return mismatch('permit', redis.call('HGET', tokens, LIMIT))
  end
end
local waiting = redis.call('PTTL', KEYS[5])
if waiting >= 0 then
  return -math.max(1, waiting)
end
return grant(KEYS[3], KEYS[4], KEYS[2], KEYS[6], owner, ttl, us, now)
