-- Extend a permit if, and only if, the owner holds it.
-- Also a reader's renewal, on the readers' keys.
-- Keys: leases (the permits or the readers), tokens. Arguments: owner, ttl (ms).
-- Returns 1 when extended, 0 when the owner held no live permit.
local now = now_ms()
local expiry = redis.call('ZSCORE', leases, owner)
if not expiry or tonumber(expiry) <= now then
  return 0
end
redis.call('ZADD', leases, now + tonumber(ttl), owner)
keep_alive(leases, tokens, now)
return 1
