-- Take a read-write lock for writing: free of writers and of live readers.
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] readers (sorted set:
-- owner -> expiry ms), KEYS[4] readers' tokens (hash), KEYS[5] the waiting
-- writer (string: owner, expiring), KEYS[6] restart guard marker
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] holder description (the lease
-- adds WRITER to it, see kind.lua), ARGV[4] how
-- long to hold new readers off while waiting, in ms (0: do not), then the
-- token grain and the guard's maximum lease as one (see token.lua)
-- Returns the token (> 0), or minus a retry hint in ms: at least 1 while
-- the holder's lease or a reader's lasts; the restart guard's refusal
-- "guard MS" (see token.lua); 0 (no hint) for a writer key without a TTL; or mismatch's reply
-- (see kind.lua), which leaves no claim.
local owner = ARGV[1]
local prefix = owner .. '\n'
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #prefix) == prefix then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
  end
  if not is_writer(v) then
    return mismatch('mutex')
  end
  return refused(KEYS[1], v)
end
local us, now = clock()
drop_expired(KEYS[3], KEYS[4], now)
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if last[2] then
  local hold = tonumber(ARGV[4])
  if hold > 0 then
    local w = redis.call('GET', KEYS[5])
    if not w or w == owner then
      redis.call('SET', KEYS[5], owner, 'PX', hold)
    end
  end
  return -math.max(1, tonumber(last[2]) - now)
end
local other = beside_lock(KEYS[2], true)
if other then
  return other
end
local fence, text = issue(KEYS[2], KEYS[6], us)
if not fence then
  return guard_refusal(text)
end
if redis.call('GET', KEYS[5]) == owner then
  redis.call('DEL', KEYS[5])
end
redis.call('SET', KEYS[1], lease(owner, text, now, ARGV[3] .. WRITER), 'PX', ARGV[2])
return fence
