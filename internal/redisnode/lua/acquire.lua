-- Take the lock if it is free, or confirm it to the owner that already has it.
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] restart guard marker
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] holder description, then the
-- token grain and the guard's maximum lease as one (see token.lua)
-- The lock's value is: owner LF fence LF since-ms LF description.
-- Returns the fencing token (> 0) when granted, or minus the holder's
-- remaining TTL in ms when not: at least 1 (a lease in its last
-- millisecond is a retry soon, not an unknown wait), or 0 for a key
-- without a TTL (no hint). While the restart guard holds grants back, the
-- reply is "guard MS", MS the time until it lets them through (see
-- guard_refusal in token.lua). A key held as another family of lock gets
-- mismatch's reply (see kind.lua).
local v = redis.call('GET', KEYS[1])
if not v then
  local other = beside_lock(KEYS[2])
  if other then
    return other
  end
  return take(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[3], ARGV[2])
end
local prefix = ARGV[1] .. '\n'
if string.sub(v, 1, #prefix) == prefix then
  -- A retry of an attempt whose reply was lost: the same grant again.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
end
if is_writer(v) then
  return mismatch('rw')
end
return refused(KEYS[1], v)
