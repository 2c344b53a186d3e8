-- Extend a permit if, and only if, the owner holds it.
-- KEYS[1] permits, KEYS[2] tokens; ARGV[1] owner, ARGV[2] TTL in ms
-- Returns 1 when extended, 0 when the owner held no live permit.
local now = now_ms()
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
keep_alive(KEYS[1], KEYS[2], now)
return 1
