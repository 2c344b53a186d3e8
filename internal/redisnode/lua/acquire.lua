-- Take the lock if it is free, or confirm it to the owner that already has it.
-- KEYS[1] lock key, KEYS[2] fencing counter
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] holder description
-- The lock's value is: owner LF fence LF since-ms LF description.
-- Returns the fencing token (> 0) when granted, or minus the holder's
-- remaining TTL in ms when not: at least 1 (a lease in its last
-- millisecond is a retry soon, not an unknown wait), or 0 for a key
-- without a TTL (no hint).
local v = redis.call('GET', KEYS[1])
if not v then
  local fence = redis.call('INCR', KEYS[2])
  local t = redis.call('TIME')
  local since = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('SET', KEYS[1], ARGV[1] .. '\n' .. fence .. '\n' .. since .. '\n' .. ARGV[3], 'PX', ARGV[2])
  return fence
end
local prefix = ARGV[1] .. '\n'
if string.sub(v, 1, #prefix) == prefix then
  -- A retry of an attempt whose reply was lost: the same grant again.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return 0
end
return -math.max(1, pttl)
