-- Shared by every script that takes helpers; it comes first, right after
-- the line that binds the script's keys and arguments, and holds only
-- what a script's fast path (the lines above its helpers) needs: a few
-- constants and two functions. Everything here is built on every run of
-- the script, so it stays small; the other helpers are built only when
-- the fast path does not decide.

-- WAITED ends the value of a lease that has refused an attempt (or was
-- granted while others queued): its release wakes the waiters, and looks
-- for fair ones first. ENLISTED ends it instead when only plain attempts,
-- which enlist their clients (see acquire.lua), waited for it: its release
-- wakes the client enlisted first without looking at the fair queue. An
-- attempt of any other kind turns ENLISTED into WAITED (see refused in
-- token.lua). A lease nobody waited for is released without a message.
local WAITED = '\n~'
local ENLISTED = '\n~>'

-- WRITER is the last line of the description of a read-write lock's
-- writer (before WAITED, if the lease is marked so). The client's own
-- description lines are never exactly this.
local WRITER = '\ndistlock.kind=write'

-- COUNTER_LIFE is how long, in ms, a fencing counter outlives its last
-- write at least, so that a key nobody uses leaves nothing behind.
local COUNTER_LIFE = 10000

-- counter_life returns how long, in ms, a counter of value token, written
-- at the server time us, must last: until the clock floor (of grain µs)
-- has passed it, so that the tokens issued after it expired are still
-- above it, and at least COUNTER_LIFE. The millisecond rounded up and one
-- more are a margin over the µs.
local function counter_life(token, us, grain)
  local ahead = token + grain - us
  return math.max(COUNTER_LIFE, math.floor(ahead / 1000) + 2)
end

-- mint returns the token after last (a number, never nil), at the server
-- time us (µs) and with the grain grain (µs, 0: no clock floor), as a
-- number and as decimal text (Lua's own conversion keeps only 14 digits),
-- and writes it to counter unless the lease (leased) and the free record
-- its release leaves keep it (see issue in token.lua, which checks the
-- restart guard first).
-- The counter lasts for counter_life.
local function mint(counter, us, grain, last, leased)
  local floor = 0
  if grain > 0 then
    floor = us - us % grain
  end
  local token = math.max(last + 1, floor)
  local text = string.format('%.0f', token)
  if grain == 0 then
    redis.call('SET', counter, text)
  elseif not leased or grain > 1000 or token > floor then
    redis.call('SET', counter, text, 'PX', counter_life(token, us, grain))
  end
  return token, text
end

-- is_free reports whether v, a value of the lock key, is a free record
-- (LF, the last release's receipt, LF its lease's token) rather than a
-- lease: no holder's name is empty, so a lease never begins with LF.
local function is_free(v)
  return string.byte(v, 1) == 10
end

-- free_record is the value a release leaves in the lock key: the receipt
-- call (owner LF call id, or '' when no call is named: a fair waiter's
-- leave, Break) and the released lease's token, as text.
local function free_record(call, text)
  return '\n' .. call .. '\n' .. text
end

-- carry returns what follows since on the third line of a lease granted
-- in place of the free record free (or nil): a space and the SHA-1 of the
-- call its receipt names, so that a repeat of that release, sent again
-- after its reply was lost, still finds it while this lease lives (see
-- given_back in release.lua); '' when it names none.
local function carry(free)
  local call = free and string.match(free, '^\n(.+)\n%d+$')
  if call then
    return ' ' .. redis.sha1hex(call)
  end
  return ''
end

-- take_quiet grants the free lock on lock to holder, with the
-- description desc and a TTL of ttl ms, when its records r (the reply of
-- MGET lock, counter, the lock key holding a free record) show it quiet:
-- the counter is not above the free record's token, so no reader or
-- permit can have been granted since that lease ended and the free record
-- keeps the highest token (see records in token.lua); the lease is
-- marked as waited for by enlisted clients when others wait (others). It returns the
-- token, or nil, having changed nothing, when the records are not quiet.
--
-- It reads the clock although last + 1 would do most of the time: only the
-- clock tells whether a token is at or below it, which is what lets the
-- lease and its free record alone keep it (see issue in token.lua). A
-- grant that gave last + 1 unread would not know whether the clock was set
-- back since last was issued; if it was, by more than the lease and its
-- free record last, the token would expire with them while still above
-- the clock, and the next grant, reading the clock on empty records, would
-- issue a lower one, with no data lost. Writing each such token to the
-- counter instead costs the command that skipping the clock saves.
local function take_quiet(lock, counter, r, holder, desc, ttl, guard, others)
  local last = tonumber(string.match(r[1], '\n(%d+)$'))
  if not last or (r[2] and tonumber(r[2]) > last) then
    return nil
  end
  local grain = tonumber(string.match(guard, '^%d+'))
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  local token, text = mint(counter, us, grain, last, true)
  local v = holder .. '\n' .. text .. '\n' .. math.floor(us / 1000) .. carry(r[1]) .. '\n' .. desc
  if others then
    v = v .. ENLISTED
  end
  redis.call('SET', lock, v, 'PX', ttl)
  return token
end
