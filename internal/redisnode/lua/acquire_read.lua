-- Take a read-write lock for reading: no writer holds it or waits for it.
-- Keys as acquire_write.lua. Arguments: owner, ttl (ms), guard (see
-- token.lua).
-- Returns the token (> 0), or minus a retry hint in ms: at least 1 while a
-- writer's lease or claim lasts; the restart guard's refusal "guard MS"
-- (see token.lua); 0
-- (no hint) for a writer key without a TTL; or mismatch's reply (see
-- kind.lua).
ttl = tonumber(ttl)
local us, now = clock()
drop_expired(readers, rtokens, now)
local again = regrant(readers, rtokens, owner, ttl, now)
if again then
  return again
end
local v = redis.call('GET', lock)
if v and not is_free(v) then
  if not is_writer(v) then
    return mismatch('mutex')
  end
  local writer = redis.call('PTTL', lock)
  if writer == -1 then
    return 0
  end
  return -math.max(1, writer)
end
if redis.call('ZCARD', readers) == 0 then
  local _, _, permits, tokens = siblings(counter)
  if live(permits, now) then
    return mismatch('permit', redis.call('HGET', tokens, LIMIT))
  end
end
local waiting = redis.call('PTTL', writing)
if waiting >= 0 then
  return -math.max(1, waiting)
end
return grant(readers, rtokens, counter, marker, owner, ttl, us, now, guard)
