-- Take a read-write lock for writing: free of writers and of live readers.
-- Keys: lock, counter (fencing), readers (sorted set: owner -> expiry ms),
-- rtokens (the readers' tokens, hash), writing (the waiting writer: owner,
-- expiring), marker (the restart guard's).
-- Arguments: owner, ttl (ms), desc (the holder's description; the lease
-- adds WRITER to it, see kind.lua), hold (how long to hold new readers off
-- while waiting, ms; 0: do not), guard (see token.lua).
-- Returns the token (> 0), or minus a retry hint in ms: at least 1 while
-- the holder's lease or a reader's lasts; the restart guard's refusal
-- "guard MS" (see token.lua); 0 (no hint) for a writer key without a TTL; or mismatch's reply
-- (see kind.lua), which leaves no claim.
local prefix = owner .. '\n'
local v, last, _, free = records(lock, counter)
if v then
  if string.sub(v, 1, #prefix) == prefix then
    redis.call('PEXPIRE', lock, ttl)
    return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
  end
  if not is_writer(v) then
    return mismatch('mutex')
  end
  return refused(lock, v)
end
local us, now = clock()
drop_expired(readers, rtokens, now)
local newest = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
if newest[2] then
  hold = tonumber(hold)
  if hold > 0 then
    local w = redis.call('GET', writing)
    if not w or w == owner then
      redis.call('SET', writing, owner, 'PX', hold)
    end
  end
  return -math.max(1, tonumber(newest[2]) - now)
end
local other = beside_lock(counter, true)
if other then
  return other
end
local fence, text = issue(counter, marker, us, guard, last, true)
if not fence then
  return guard_refusal(text)
end
if redis.call('GET', writing) == owner then
  redis.call('DEL', writing)
end
redis.call('SET', lock, lease(owner, text, now .. carry(free), desc .. WRITER), 'PX', ttl)
return fence
