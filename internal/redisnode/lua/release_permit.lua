-- Give a permit back if, and only if, the owner holds it, and wake waiters.
-- KEYS[1] permits, KEYS[2] tokens, KEYS[3] receipts (sorted set: owner LF
-- call id -> expiry ms)
-- ARGV[1] owner, ARGV[2] release channel, ARGV[3] the call's id, ARGV[4]
-- how long a receipt lasts, in ms
-- Returns 1 when released (by this call, or by its first sending when this
-- is a repeat after a lost reply), 0 when the owner held no live permit.
local call = ARGV[1] .. '\n' .. ARGV[3]
local now = now_ms()
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry then
  local receipt = redis.call('ZSCORE', KEYS[3], call)
  if receipt and tonumber(receipt) > now then
    return 1
  end
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- The last lease: its token hash goes too, with a semaphore's n (see
  -- kind.lua).
  redis.call('DEL', KEYS[2])
else
  redis.call('HDEL', KEYS[2], ARGV[1])
end
if tonumber(expiry) <= now then
  return 0
end
-- The receipt lets a repeat of this call, sent again because its reply was
-- lost, report the release it made. One per call, since many owners give
-- permits back at once; lapsed ones go with each release.
local life = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], now + life, call)
redis.call('PEXPIRE', KEYS[3], life)
redis.call('PUBLISH', ARGV[2], '')
return 1
