-- Give a permit back if, and only if, the owner holds it, and wake waiters.
-- KEYS[1] permits, KEYS[2] tokens; ARGV[1] owner, ARGV[2] release channel
-- Returns 1 when released, 0 when the owner held no live permit.
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if tonumber(expiry) <= now_ms() then
  return 0
end
redis.call('PUBLISH', ARGV[2], '')
return 1
