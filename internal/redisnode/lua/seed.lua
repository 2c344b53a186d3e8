-- Raise the fencing counter to at least ARGV[1], never lower it.
-- KEYS[1] fencing counter. Returns the counter's value.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if want > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return want
end
return cur
