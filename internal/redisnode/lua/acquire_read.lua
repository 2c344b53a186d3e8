-- Take a read-write lock for reading: no writer holds it or waits for it.
-- KEYS as acquire_write.lua; ARGV[1] owner, ARGV[2] TTL in ms
-- Returns the token (> 0), or minus a retry hint in ms (<= 0).
local owner, ttl = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
drop_expired(KEYS[3], KEYS[4], now)
if redis.call('ZSCORE', KEYS[3], owner) then
  -- A retry of an attempt whose reply was lost: the same grant again.
  redis.call('ZADD', KEYS[3], now + ttl, owner)
  keep_alive(KEYS[3], KEYS[4], now)
  return tonumber(redis.call('HGET', KEYS[4], owner))
end
local writer = redis.call('PTTL', KEYS[1])
if writer == -1 or writer > 0 then
  return -math.max(0, writer)
end
local waiting = redis.call('PTTL', KEYS[5])
if waiting > 0 then
  return -waiting
end
local fence = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], now + ttl, owner)
redis.call('HSET', KEYS[4], owner, fence)
keep_alive(KEYS[3], KEYS[4], now)
return fence
