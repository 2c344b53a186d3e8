-- Take the lock as a re-entrant lease, or one more hold of it when a lease
-- of the same identity has it; or confirm a hold to its owner again.
-- Keys: lock, counter (fencing), marker (the restart guard's), holds (the
-- lease's holds, hash: owner -> 1).
-- Arguments: owner, ttl (ms), desc (the holder's description), reentry
-- (the re-entrant identity), guard (see token.lua).
-- A re-entrant lease's value is '*' identity LF fence LF since-ms LF
-- description: no owner's prefix matches it, so the plain scripts refuse
-- it and reach for the holds only when their owner is not the value's.
-- Returns what acquire.lua returns; every hold has the lease's token.
local v, last, quiet, free = records(lock, counter)
local mark = '*' .. reentry .. '\n'
if not v then
  if not quiet then
    local other = beside_lock(counter)
    if other then
      return other
    end
  end
  local fence = take(lock, counter, marker, '*' .. reentry, desc, ttl, guard, last, free)
  if type(fence) == 'number' then
    first_hold(holds, owner, ttl)
  end
  return fence
end
if string.sub(v, 1, #mark) == mark then
  return add_hold(lock, holds, owner, ttl, v)
end
if is_writer(v) then
  return mismatch('rw')
end
return refused(lock, v)
