-- Raise the fencing counter to at least ARGV[1], never lower it; and, with
-- ARGV[2], the token of the re-entrant lease of that identity if it holds
-- the lock (KEYS[2]), so that its later holds report the same token.
-- KEYS[1] fencing counter, KEYS[2] lock key
-- ARGV[1] the token, ARGV[2] the re-entrant identity or '', then the token
-- grain and the guard's maximum lease as one (see token.lua), by which a
-- raised counter lasts until the clock floor has passed it.
-- Returns the counter's value.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if ARGV[2] ~= '' then
  local v = redis.call('GET', KEYS[2])
  local mark = '*' .. ARGV[2] .. '\n'
  if v and string.sub(v, 1, #mark) == mark then
    local fence, rest = string.match(string.sub(v, #mark + 1), '^(%d+)(.*)$')
    if fence and tonumber(fence) < want then
      redis.call('SET', KEYS[2], mark .. ARGV[1] .. rest, 'KEEPTTL')
    end
  end
end
if want > cur then
  local grain = tonumber(string.match(ARGV[#ARGV], '^(%d+):'))
  if grain == 0 then
    redis.call('SET', KEYS[1], ARGV[1])
  else
    local us = clock()
    redis.call('SET', KEYS[1], ARGV[1], 'PX', counter_life(want, us, grain))
  end
  return want
end
return cur
