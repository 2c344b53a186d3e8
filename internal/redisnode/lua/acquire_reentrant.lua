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
local ttl = tonumber(ARGV[2])
local mark = '*' .. ARGV[4] .. '\n'
if not v then
  local fence = take(KEYS[1], KEYS[2], KEYS[3], '*' .. ARGV[4], ARGV[3], ttl)
  if fence <= 0 then
    return fence
  end
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[4], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[4], ttl)
  return fence
end
if string.sub(v, 1, #mark) == mark then
  -- One more hold, or the same one again after a lost reply (HSET then
  -- adds nothing). The lease is the holds': never shortened while another
  -- hold may rely on it.
  redis.call('HSET', KEYS[4], ARGV[1], 1)
  if redis.call('HLEN', KEYS[4]) > 1 then
    ttl = math.max(ttl, redis.call('PTTL', KEYS[1]))
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[4], ttl)
  return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
end
return refused(KEYS[1], v)
