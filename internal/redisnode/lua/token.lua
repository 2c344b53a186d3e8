-- Shared by the scripts that issue fencing tokens; prepended to them. Such
-- a script takes the argument guard, last: "grain:maxttl", the token grain
-- in µs and the restart guard's maximum lease length in ms (0: no guard),
-- which it hands to issue. One argument, not two: a server refuses a
-- command of more than 10 parts from a client that has not authenticated
-- with a protocol error, which would hide its NOAUTH.
--
-- clock returns the server's time in µs and in ms. µs since 1970 are about
-- 1.8e15 and stay below 2^53, so Lua's doubles hold them, and every token,
-- exactly.
local function clock()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  return us, math.floor(us / 1000)
end

-- WAITED ends the value of a lease that has refused an attempt (or was
-- granted while others queued): its release wakes the waiters. A lease
-- nobody waited for is released without a message.
local WAITED = '\n~'

-- waited reports whether the lease value v is marked as waited for.
local function waited(v)
  return string.sub(v, -2) == WAITED
end

-- refused is the reply of an attempt refused by the lease on lock, whose
-- value is v: minus its remaining TTL in ms, at least 1 (a lease in its
-- last millisecond is a retry soon, not an unknown wait), or 0 for a key
-- without a TTL. It marks the lease as waited for.
local function refused(lock, v)
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then
    return 0
  end
  if not waited(v) then
    redis.call('SET', lock, v .. WAITED, 'KEEPTTL')
  end
  return -math.max(1, pttl)
end

-- COUNTER_LIFE is how long, in ms, a fencing counter outlives its last
-- write at least, so that a key nobody uses leaves nothing behind.
local COUNTER_LIFE = 10000

-- counter_life returns how long, in ms, a counter of value token, written
-- at the server time us, must last: until the clock floor (of grain µs)
-- has passed it, so that the tokens issued after it expired are still
-- above it, and at least COUNTER_LIFE. The millisecond rounded up and one
-- more cover the few µs a counter raised by INCR gains on the life its
-- last write gave it (see issue).
local function counter_life(token, us, grain)
  local ahead = token + grain - us
  return math.max(COUNTER_LIFE, math.floor(ahead / 1000) + 2)
end

-- NO_INFO begins the error of a script whose restart guard may not read
-- INFO (redisnode.BlindGuard recognises it).
local NO_INFO = 'ERR distlock: the restart guard cannot read INFO server'

-- issue returns the next fencing token of counter, under the settings
-- guard ("grain:maxttl", see above), as a number and as
-- decimal text (Lua's own conversion keeps only 14 digits); or nil and the
-- ms to wait while the restart guard holds grants back.
--
-- The token is max(counter + 1, now rounded down to the grain), stored back
-- as the counter: a counter that was lost (restart, flush, eviction,
-- failover to a lagging replica) resumes above every token issued before
-- the loss, as long as the server's clock has not gone back by more than
-- the loss took. A counter expires once the floor has passed it (see
-- counter_life), which loses nothing: the floor then gives a higher token.
-- Without a clock floor (grain 0) it never expires.
--
-- A missing counter is a key new to this node, one unused long enough for
-- its counter to expire, or one whose data the node lost. The guard tells
-- the last apart by the node's life: the marker holds the run id of a life
-- known not to follow a loss, written by a declaration that the server is
-- new, or by this function once the server has run for one maximum lease
-- length, after which no lease granted before its start can be alive.
-- Until then, a new key waits. uptime_in_seconds is the difference of two
-- whole-second clock readings, up to a second more than the server has
-- run: one second comes off it.
local function issue(counter, marker, us, guard)
  local g, m = string.match(guard, '^(%d+):(%d+)$')
  local grain, maxttl = tonumber(g), tonumber(m)
  local floor = 0
  if grain > 0 then
    floor = us - us % grain
  end
  -- One command reads the counter and writes it: a µs floor is almost
  -- always above the counter, so it is written and the old value read back
  -- (SET ... GET); a coarser one is usually behind it, so the counter is
  -- raised by one (INCR: 1 means it was missing, and INCR keeps the
  -- counter's expiry). A second write follows only when that guess was
  -- wrong, or when the counter ran ahead of the floor and so must last
  -- longer.
  local c, raised
  if grain > 0 and grain <= 1000 then
    c = redis.call('SET', counter, string.format('%.0f', floor), 'GET', 'PX', counter_life(floor, us, grain))
    raised = floor
  else
    local n = redis.call('INCR', counter)
    if n > 1 then
      c = string.format('%.0f', n - 1)
    end
    raised = n
  end
  if not c and maxttl > 0 then
    local info = redis.pcall('INFO', 'server')
    if type(info) == 'table' and info.err then
      -- An ACL that forbids INFO: the counter just written would let the
      -- next attempt past the guard, so it goes, and the script fails.
      redis.call('DEL', counter)
      error({err = NO_INFO .. ' (' .. info.err .. ')'})
    end
    local life = string.match(info, 'run_id:(%w+)')
    if redis.call('GET', marker) ~= life then
      local up = (tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) - 1) * 1000
      if up < maxttl then
        redis.call('DEL', counter)
        return nil, maxttl - up
      end
      redis.call('SET', marker, life)
    end
  end
  local token = math.max(tonumber(c or '0') + 1, floor)
  local text = string.format('%.0f', token)
  if grain == 0 then
    if token ~= raised then
      redis.call('SET', counter, text)
    end
  elseif token ~= raised then
    redis.call('SET', counter, text, 'PX', counter_life(token, us, grain))
  elseif token > floor then
    redis.call('PEXPIRE', counter, counter_life(token, us, grain))
  end
  return token, text
end

-- lease returns the value of a lease of holder (an owner, or a re-entrant
-- lease's mark) with token text, granted at since (server ms), described by
-- desc; marked as waited for when others wait in line.
local function lease(holder, text, since, desc, others)
  local v = holder .. '\n' .. text .. '\n' .. since .. '\n' .. desc
  if others then
    return v .. WAITED
  end
  return v
end

-- guard_refusal is the reply of an attempt that the restart guard held
-- back for ms more: "guard MS", told apart from a holder's refusal.
local function guard_refusal(ms)
  return 'guard ' .. string.format('%.0f', math.max(1, ms))
end

-- take writes a new lease on lock, free, for head (an owner, or a
-- re-entrant lease's mark) with the description desc and a TTL of ttl ms,
-- and returns its token from counter; or, while the restart guard (marker)
-- holds grants back, its refusal (see guard_refusal).
local function take(lock, counter, marker, head, desc, ttl, guard)
  local us, since = clock()
  local fence, text = issue(counter, marker, us, guard)
  if not fence then
    return guard_refusal(text)
  end
  redis.call('SET', lock, lease(head, text, since, desc), 'PX', ttl)
  return fence
end
