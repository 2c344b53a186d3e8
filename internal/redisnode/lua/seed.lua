-- Raise the fencing counter to at least token, never lower it; and, with
-- reentry, the token of the re-entrant lease of that identity if it holds
-- the lock, so that its later holds report the same token.
-- Keys: counter (fencing), lock.
-- Arguments: token, reentry (the re-entrant identity or ''), guard (see
-- token.lua), by which a raised counter lasts until the clock floor has
-- passed it.
-- Returns the counter's value.
local _, last = records(lock, counter)
local cur = last or 0
local want = tonumber(token)
if reentry ~= '' then
  local v = redis.call('GET', lock)
  local mark = '*' .. reentry .. '\n'
  if v and string.sub(v, 1, #mark) == mark then
    local fence, rest = string.match(string.sub(v, #mark + 1), '^(%d+)(.*)$')
    if fence and tonumber(fence) < want then
      redis.call('SET', lock, mark .. token .. rest, 'KEEPTTL')
    end
  end
end
if want > cur then
  local grain = tonumber(string.match(guard, '^(%d+):'))
  if grain == 0 then
    redis.call('SET', counter, token)
  else
    local us = clock()
    redis.call('SET', counter, token, 'PX', counter_life(want, us, grain))
  end
  return want
end
return cur
