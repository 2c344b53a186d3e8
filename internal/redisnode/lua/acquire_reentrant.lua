-- Take the lock as a re-entrant lease, or one more hold of it when a lease
-- of the same identity has it; or confirm a hold to its owner again.
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] restart guard marker,
-- KEYS[4] the lease's holds (hash: owner -> 1)
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] holder description, ARGV[4]
-- the re-entrant identity, then the token grain and the guard's maximum
-- lease (see token.lua)
-- A re-entrant lease's value is '*' identity LF fence LF since-ms LF
-- description: no owner's prefix matches it, so the plain scripts refuse
-- it and reach for the holds only when their owner is not the value's.
-- Returns what acquire.lua returns; every hold has the lease's token.
local v = redis.call('GET', KEYS[1])
local mark = '*' .. ARGV[4] .. '\n'
if not v then
  local other = beside_lock(KEYS[2])
  if other then
    return other
  end
  local fence = take(KEYS[1], KEYS[2], KEYS[3], '*' .. ARGV[4], ARGV[3], ARGV[2])
  if type(fence) == 'number' then
    first_hold(KEYS[4], ARGV[1], ARGV[2])
  end
  return fence
end
if string.sub(v, 1, #mark) == mark then
  return add_hold(KEYS[1], KEYS[4], ARGV[1], ARGV[2], v)
end
if is_writer(v) then
  return mismatch('rw')
end
return refused(KEYS[1], v)
