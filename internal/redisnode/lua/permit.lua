-- Shared by the semaphore and read-write scripts; prepended to them, after
-- token.lua. now_ms is the server's time; drop_expired removes the permits
-- whose lease ran out, and keep_alive lets the semaphore's keys expire with
-- its last permit.
local function now_ms()
  local _, ms = clock()
  return ms
end

-- Lua's unpack fails past about 8000 values, so the tokens of many lapsed
-- permits go in chunks.
local function drop_expired(permits, tokens, now)
  local gone = redis.call('ZRANGEBYSCORE', permits, '-inf', now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', permits, '-inf', now)
    for i = 1, #gone, 1000 do
      redis.call('HDEL', tokens, unpack(gone, i, math.min(i + 999, #gone)))
    end
  end
end

local function keep_alive(permits, tokens, now)
  local last = redis.call('ZRANGE', permits, -1, -1, 'WITHSCORES')
  if last[2] then
    local life = math.max(1, tonumber(last[2]) - now)
    redis.call('PEXPIRE', permits, life)
    redis.call('PEXPIRE', tokens, life)
  end
end

-- regrant renews owner's lease if it already holds one (a retry of an
-- attempt whose reply was lost) and returns its token, or nil.
local function regrant(leases, tokens, owner, ttl, now)
  if not redis.call('ZSCORE', leases, owner) then
    return nil
  end
  redis.call('ZADD', leases, now + ttl, owner)
  keep_alive(leases, tokens, now)
  return tonumber(redis.call('HGET', tokens, owner))
end

-- grant gives owner a new lease with the next fencing token and returns
-- the token, or the restart guard's refusal (see guard_refusal). The token
-- is written to the counter (no lease of the lock key keeps it).
local function grant(leases, tokens, counter, marker, owner, ttl, us, now, guard)
  local _, last = records(string.sub(counter, 1, -7), counter)
  local fence, text = issue(counter, marker, us, guard, last)
  if not fence then
    return guard_refusal(text)
  end
  redis.call('ZADD', leases, now + ttl, owner)
  redis.call('HSET', tokens, owner, text)
  keep_alive(leases, tokens, now)
  return fence
end
