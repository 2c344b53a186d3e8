-- Free the lock if, and only if, the owner holds it, and wake the waiters:
-- the lock goes straight to the oldest live fair waiter, if its client
-- takes grants by message, or the message names that waiter, whose turn it
-- is; else it names the client enlisted first (see wake_one), or nobody
-- (every waiter may try); the fair line is not looked at when only plain
-- attempts waited (ENLISTED, see prelude.lua). A writer of a read-write lock that
-- gave up waiting withdraws its claim on the readers. A hold of a
-- re-entrant lease (see acquire_reentrant.lua) ends; the lease ends with
-- its last hold.
-- Keys: lock, queue and places (the fair line), writing (the waiting
-- writer), holds (a re-entrant lease's), hold_receipts (of its holds'
-- releases, sorted set: owner LF call id -> expiry ms), counter
-- (fencing), marker (the restart guard's), waiters (the clients enlisted
-- by refused attempts, see acquire.lua).
-- Arguments: owner, channel (to publish on), call (the call's id),
-- receipt_life (how long the receipt lasts, ms), wake (what the wake-up
-- says): '' the
-- oldest live fair waiter, or nobody; 't' the released lease's token, by
-- which a waiter that hears the release from several nodes (Redlock) wakes
-- once; '-' nothing is published (a failed attempt giving back its
-- minority, which wakes nobody's chance), unless the lease refused an
-- attempt: then as 't'. A lease nobody waited for (see WAITED in
-- token.lua) wakes nobody either way; client (the releasing client's id,
-- or '': see wake_one); guard (see token.lua), for a grant handed on.
-- Returns 1 when released (by this call, or by its first sending when this
-- is a repeat after a lost reply), minus the released lease's token when
-- released by this call, which woke another client by name (see wake_one:
-- the releasing client yields to it for a moment, see acquire.lua), 0
-- when the owner did not hold it.
--
-- The fast path, before the helpers are built: the owner's own lease,
-- which nobody waited for and which is no writer's, goes without a
-- message, leaving the free record that names this call in its place.
-- The lock and its counter, read at once: a hand-over issues a token
-- after both (hand_over), and an MGET costs no more than the lock's GET.
local read = redis.call('MGET', lock, counter)
local v, counter_text = read[1], read[2]
local prefix = owner .. '\n'
if v and string.sub(v, 1, #prefix) == prefix and string.sub(v, -#WAITED) ~= WAITED
    and string.sub(v, -#ENLISTED) ~= ENLISTED and string.sub(v, -#WRITER) ~= WRITER then
  redis.call('SET', lock, free_record(prefix .. call, string.match(v, '^[^\n]*\n(%d+)')), 'PX', COUNTER_LIFE)
  return 1
end
--[[helpers]]

-- hand_over gives the lock, still held by the releasing owner, to the fair
-- waiter head, whose place is rec, at the server time us (µs) and now
-- (ms), and tells it so: '=' owner LF token LF lease ms LF the stamp of its
-- attempt. The lease lasts at most the place's length, so that a waiter
-- that vanished holds the lock up no longer than its place would have;
-- its client renews it at once. It reports false, changing nothing, when
-- the waiter's client does not take grants by message or the restart guard
-- holds grants back.
local function hand_over(head, rec, us, now, v)
  local ttl, place, stamp, desc = string.match(rec, '^%d+\n(%d+)\n(%d+)\n(%d+)\n(.*)$')
  if not stamp then
    return false
  end
  local px = math.min(tonumber(ttl), tonumber(place))
  local last = highest(lease_token(v), counter_text and tonumber(counter_text) or nil)
  local fence, text = issue(counter, marker, us, guard, last, true)
  if not fence then
    return false
  end
  local mark = leave_line(queue, places, head) and WAITED
  redis.call('SET', lock, lease(head, text, now .. ' ' .. redis.sha1hex(call), desc, mark), 'PX', px)
  redis.call('PUBLISH', channel, '=' .. head .. '\n' .. text .. '\n' .. px .. '\n' .. stamp)
  return true
end

-- given_back reports whether this call (owner LF call id) released a
-- holding lately: it left a receipt, for the lock (the free record in the
-- lock key, or, carried from it, in the lease granted next: see carry in
-- prelude.lua) or for one hold.
local function given_back(call)
  if v and is_free(v) then
    if string.match(v, '^\n(.*)\n%d+$') == call then
      return true
    end
  elseif v and string.match(v, '^[^\n]*\n%d+\n%d+ (%x+)') == redis.sha1hex(call) then
    return true
  end
  local until_ms = redis.call('ZSCORE', hold_receipts, call)
  if until_ms then
    local t = redis.call('TIME')
    return tonumber(until_ms) > t[1] * 1000 + math.floor(t[2] / 1000)
  end
  return false
end

-- wake_one returns the wake-up of a plain lock's release, whose lease
-- was v: '>' and the id of the client enlisted first (see acquire.lua),
-- taken out of waiters, so that the next release wakes the next; its
-- notifier wakes its own waiters alone, or passes the wake-up on (see
-- pass.lua). '' (every waiter) when none is enlisted, or for a writer,
-- whose release may let in every reader.
-- It reports too whether the releasing client, named by client, is to
-- yield to the one woken: it would take the lock back first.
local function wake_one(v)
  if is_writer(v) then
    return '', false
  end
  local first = redis.call('ZPOPMIN', waiters)[1]
  if first then
    return '>' .. first, client ~= '' and first ~= client
  end
  return '', false
end

call = prefix .. call
local last = v and string.sub(v, 1, #prefix) == prefix
-- A give-back names its grant as owner LF token (see GiveBack); for a hold
-- of a re-entrant lease, the hold is the owner's in the lease of that token.
local hold, named = string.match(owner, '^(.*)\n(%d+)$')
if not named then
  hold = owner
end
if not last and v and string.byte(v, 1) == 42 then
  local mine = not named or string.match(v, '^[^\n]*\n(%d+)') == named
  if mine and named and given_back(call) then
    -- This give-back ran already, sent again: a later hold of the owner
    -- is not its to end.
    return 1
  end
  if mine and redis.call('HDEL', holds, hold) == 1 then
    last = redis.call('HLEN', holds) == 0
    if not last then
      -- Other holds remain. Receipts are kept per call, as several holds
      -- may be released at once; lapsed ones go with each release.
      local t = redis.call('TIME')
      local now = t[1] * 1000 + math.floor(t[2] / 1000)
      redis.call('ZREMRANGEBYSCORE', hold_receipts, '-inf', now)
      redis.call('ZADD', hold_receipts, now + tonumber(receipt_life), call)
      redis.call('PEXPIRE', hold_receipts, receipt_life)
      return 1
    end
  end
end
if last then
  -- The receipt lets a repeat of this call, sent again because its reply
  -- was lost, report the release it made. A later releaser overwrites it.
  -- It keeps the lease's token too (see issue in token.lua), for
  -- COUNTER_LIFE: no longer, so that a counter written after it outlives
  -- it (see records). The lock key keeps it as its free record, and the
  -- lease granted next (by hand-over here, or by a waiter woken now)
  -- carries it on.
  local freed = free_record(call, lease_text(v))
  -- Only a lease that refused an attempt, or was granted while others
  -- queued, has waiters to wake (readers kept out by a writer do not mark
  -- its lease: a writer's release always wakes).
  local say = wake
  if not waited(v) and not is_writer(v) then
    say = '-'
  elseif say == '-' then
    -- A minority given back that refused others: they wait for it.
    say = 't'
  end
  if say == 't' then
    redis.call('SET', lock, freed, 'PX', COUNTER_LIFE)
    redis.call('PUBLISH', channel, string.match(v, '^[^\n]*\n(%d+)') or '')
  elseif say == '-' then
    redis.call('SET', lock, freed, 'PX', COUNTER_LIFE)
  else
    -- A lease that only plain attempts waited for (ENLISTED) has no fair
    -- waiter to look for: a fair attempt it refused marked it WAITED. (A
    -- plain grant ignores the fair line, as the package documentation
    -- says: fair waiters that queued before it wait for their next try.)
    local head, rec, us, now
    if string.sub(v, -#ENLISTED) ~= ENLISTED then
      head, rec, us, now = live_head(queue, places)
    end
    if not (head and hand_over(head, rec, us, now, v)) then
      redis.call('SET', lock, freed, 'PX', COUNTER_LIFE)
      if head then
        redis.call('PUBLISH', channel, head)
      else
        local message, yields = wake_one(v)
        redis.call('PUBLISH', channel, message)
        if yields then
          return -tonumber(lease_text(v))
        end
      end
    end
  end
  return 1
end
if given_back(call) then
  return 1
end
if redis.call('GET', writing) == owner then
  redis.call('DEL', writing)
  redis.call('PUBLISH', channel, '')
end
return 0
