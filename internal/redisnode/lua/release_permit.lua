-- Give a permit back if, and only if, the owner holds it, and wake waiters.
-- Also a reader's release, on the readers' keys.
-- Keys: leases (the permits or the readers), tokens (theirs), receipts
-- (sorted set: owner LF call id -> expiry ms).
-- Arguments: owner, channel, call (the call's id), receipt_life (how long
-- a receipt lasts, ms).
-- Returns 1 when released (by this call, or by its first sending when this
-- is a repeat after a lost reply), 0 when the owner held no live permit.
call = owner .. '\n' .. call
local now = now_ms()
local expiry = redis.call('ZSCORE', leases, owner)
if not expiry then
  local receipt = redis.call('ZSCORE', receipts, call)
  if receipt and tonumber(receipt) > now then
    return 1
  end
  return 0
end
redis.call('ZREM', leases, owner)
if redis.call('EXISTS', leases) == 0 then
  -- The last lease: its token hash goes too, with a semaphore's n (see
  -- kind.lua).
  redis.call('DEL', tokens)
else
  redis.call('HDEL', tokens, owner)
end
if tonumber(expiry) <= now then
  return 0
end
-- The receipt lets a repeat of this call, sent again because its reply was
-- lost, report the release it made. One per call, since many owners give
-- permits back at once; lapsed ones go with each release.
local life = tonumber(receipt_life)
redis.call('ZREMRANGEBYSCORE', receipts, '-inf', now)
redis.call('ZADD', receipts, now + life, call)
redis.call('PEXPIRE', receipts, life)
redis.call('PUBLISH', channel, '')
return 1
