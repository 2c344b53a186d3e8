-- Shared by the semaphore scripts; prepended to them.
-- now_ms is the server's time; drop_expired removes the permits whose
-- lease ran out, and keep_alive lets the semaphore's keys expire with its
-- last permit.
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

local function drop_expired(permits, tokens, now)
  local gone = redis.call('ZRANGEBYSCORE', permits, '-inf', now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', permits, '-inf', now)
    redis.call('HDEL', tokens, unpack(gone))
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
