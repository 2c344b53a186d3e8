-- Delete the lock if, and only if, the owner holds it, and wake the waiters:
-- the lock goes straight to the oldest live fair waiter, if its client
-- takes grants by message, or the message names that waiter, whose turn it
-- is, or nobody (every waiter may try). A writer of a read-write lock that
-- gave up waiting withdraws its claim on the readers. A hold of a
-- re-entrant lease (see acquire_reentrant.lua) ends; the lease ends with
-- its last hold.
-- KEYS[1] lock key, KEYS[2] fair queue, KEYS[3] fair places, KEYS[4] the
-- waiting writer, KEYS[5] the release receipt, KEYS[6] a re-entrant
-- lease's holds, KEYS[7] the receipts of its holds' releases (sorted set:
-- owner LF call id -> expiry ms), KEYS[8] fencing counter, KEYS[9] restart
-- guard marker
-- ARGV[1] owner, ARGV[2] release channel, ARGV[3] the call's id, ARGV[4] how
-- long the receipt lasts, in ms, ARGV[5] what the wake-up says: '' the
-- oldest live fair waiter, or nobody; 't' the released lease's token, by
-- which a waiter that hears the release from several nodes (Redlock) wakes
-- once; '-' nothing is published (a failed attempt giving back its
-- minority, which wakes nobody's chance), unless the lease refused an
-- attempt: then as 't'. A lease nobody waited for (see WAITED in
-- token.lua) wakes nobody either way. Then the token grain and
-- the guard's maximum lease as one (see token.lua), for a grant handed on.
-- Returns 1 when released (by this call, or by its first sending when this
-- is a repeat after a lost reply), 0 when the owner did not hold it.

-- hand_over gives the lock, still held by the releasing owner, to the fair
-- waiter head, whose place is rec, at the server time us (µs) and now
-- (ms), and tells it so: '=' owner LF token LF lease ms LF the stamp of its
-- attempt. The lease lasts at most the place's length, so that a waiter
-- that vanished holds the lock up no longer than its place would have;
-- its client renews it at once. It reports false, changing nothing, when
-- the waiter's client does not take grants by message or the restart guard
-- holds grants back.
local function hand_over(head, rec, us, now)
  local ttl, place, stamp, desc = string.match(rec, '^%d+\n(%d+)\n(%d+)\n(%d+)\n(.*)$')
  if not stamp then
    return false
  end
  local fence, text = issue(KEYS[8], KEYS[9], us)
  if not fence then
    return false
  end
  local px = math.min(tonumber(ttl), tonumber(place))
  local others = leave_line(KEYS[2], KEYS[3], head)
  redis.call('SET', KEYS[1], lease(head, text, now, desc, others), 'PX', px)
  redis.call('PUBLISH', ARGV[2], '=' .. head .. '\n' .. text .. '\n' .. px .. '\n' .. stamp)
  return true
end

-- given_back reports whether this call (owner LF call id) released a
-- holding lately: it left a receipt, for the lock or for one hold.
local function given_back(call)
  if redis.call('GET', KEYS[5]) == call then
    return true
  end
  local receipt = redis.call('ZSCORE', KEYS[7], call)
  if receipt then
    local t = redis.call('TIME')
    return tonumber(receipt) > t[1] * 1000 + math.floor(t[2] / 1000)
  end
  return false
end

local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. '\n'
local call = prefix .. ARGV[3]
local last = v and string.sub(v, 1, #prefix) == prefix
-- A give-back names its grant as owner LF token (see GiveBack); for a hold
-- of a re-entrant lease, the hold is the owner's in the lease of that token.
local hold, named = string.match(ARGV[1], '^(.*)\n(%d+)$')
if not named then
  hold = ARGV[1]
end
if not last and v and string.byte(v, 1) == 42 then
  local mine = not named or string.match(v, '^[^\n]*\n(%d+)') == named
  if mine and named and given_back(call) then
    -- This give-back ran already, sent again: a later hold of the owner
    -- is not its to end.
    return 1
  end
  if mine and redis.call('HDEL', KEYS[6], hold) == 1 then
    last = redis.call('HLEN', KEYS[6]) == 0
    if not last then
      -- Other holds remain. Receipts are kept per call, as several holds
      -- may be released at once; lapsed ones go with each release.
      local t = redis.call('TIME')
      local now = t[1] * 1000 + math.floor(t[2] / 1000)
      redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now)
      redis.call('ZADD', KEYS[7], now + tonumber(ARGV[4]), call)
      redis.call('PEXPIRE', KEYS[7], ARGV[4])
      return 1
    end
  end
end
if last then
  -- The receipt lets a repeat of this call, sent again because its reply
  -- was lost, report the release it made. A later releaser overwrites it.
  redis.call('SET', KEYS[5], call, 'PX', ARGV[4])
  -- Only a lease that refused an attempt, or was granted while others
  -- queued, has waiters to wake (readers kept out by a writer do not mark
  -- its lease: a writer's release always wakes).
  local say = ARGV[5]
  if not waited(v) and not is_writer(v) then
    say = '-'
  elseif say == '-' then
    -- A minority given back that refused others: they wait for it.
    say = 't'
  end
  if say == 't' then
    redis.call('DEL', KEYS[1])
    redis.call('PUBLISH', ARGV[2], string.match(v, '^[^\n]*\n(%d+)') or '')
  elseif say == '-' then
    redis.call('DEL', KEYS[1])
  else
    local head, rec, us, now = live_head(KEYS[2], KEYS[3])
    if not (head and hand_over(head, rec, us, now)) then
      redis.call('DEL', KEYS[1])
      redis.call('PUBLISH', ARGV[2], head or '')
    end
  end
  return 1
end
if given_back(call) then
  return 1
end
if redis.call('GET', KEYS[4]) == ARGV[1] then
  redis.call('DEL', KEYS[4])
  redis.call('PUBLISH', ARGV[2], '')
end
return 0
