-- Take the lock if it is free, or confirm it to the owner that already has it.
-- Keys: lock, counter (fencing), marker (the restart guard's), waiters
-- (the enlisted clients, see enlist below), left off with client.
-- Arguments: owner, ttl (ms), desc (the holder's description), guard (the
-- token grain and the guard's maximum lease, see token.lua), client (the
-- id of the attempt's client, whose notifier hears the lock's channel,
-- after a '+' when a release named it since its last attempt, or after
-- '-', a token and a space when the client yields (below); '' or left
-- off: enlist nobody. Left off, the command has at most 10 parts,
-- which a server takes from a client that has not authenticated, and
-- answers with its NOAUTH).
-- The lock's value is: owner LF fence LF since-ms LF description.
-- Returns the fencing token (> 0) when granted, or minus the holder's
-- remaining TTL in ms when not: at least 1 (a lease in its last
-- millisecond is a retry soon, not an unknown wait), or 0 for a key
-- without a TTL (no hint). While the restart guard holds grants back, the
-- reply is "guard MS", MS the time until it lets them through (see
-- guard_refusal in token.lua). A key held as another family of lock gets
-- mismatch's reply (see kind.lua).
--
-- The fast paths, before the helpers are built: a free lock whose records
-- are quiet (see take_quiet in prelude.lua); a lease of another owner,
-- no writer's, marked as waited for already (as refused does below).
--
-- A refusal here marks the lease ENLISTED (see prelude.lua), not WAITED:
-- its release then wakes the client enlisted first without looking for
-- fair waiters, whose own refused attempts mark it WAITED.
--
-- A refused attempt of a client enlists it in waiters, scored by the
-- holder's token, so the oldest enlisted first: the release of the lease
-- wakes that one client, not every waiter (see release.lua). The set
-- lasts as long as the lease, and WAITERS_LIFE more.
--
-- A client that released the lock a moment ago and woke another by name
-- (the release told it so) yields to that one, which would otherwise find
-- the lock taken back before it can ask: its attempts, for a short while,
-- name it after '-' and the token of the lease it released. Such an
-- attempt enlists it, scored by that token, and is refused (0), without
-- reading the lock.
local WAITERS_LIFE = 10000
client = client or ''
local named = string.sub(client, 1, 1) == '+'
if named then
  client = string.sub(client, 2)
end
local function enlist(score, pttl)
  if client ~= '' then
    redis.call('ZADD', waiters, score or 0, client)
    redis.call('PEXPIRE', waiters, math.max(pttl, 0) + WAITERS_LIFE)
  end
end
local yielding = string.match(client, '^%-(%d+) ')
if yielding then
  client = string.sub(client, #yielding + 3)
  enlist(yielding, 0)
  return 0
end
local r = redis.call('MGET', lock, counter)
local found = r[1]
-- A client woken by name marks its lease as waited for, so that its
-- release wakes the next: in a handoff others are enlisted by then (the
-- releaser itself, yielding), and looking would cost a command every
-- time to save a wake-up nobody hears now and then.
local others = named
if found and is_free(found) then
  local token = take_quiet(lock, counter, r, owner, desc, ttl, guard, others)
  if token then
    return token
  end
elseif found and (string.sub(found, -#ENLISTED) == ENLISTED or string.sub(found, -#WAITED) == WAITED
    and string.sub(found, -#WRITER - #WAITED) ~= WRITER .. WAITED) and string.sub(found, 1, #owner + 1) ~= owner .. '\n' then
  local pttl = redis.call('PTTL', lock)
  enlist(string.match(found, '^[^\n]*\n(%d+)'), pttl)
  if pttl < 0 then
    return 0
  end
  return -math.max(1, pttl)
end
--[[helpers]]
local v, last, quiet, free = records(lock, counter, r)
if not v then
  if not quiet then
    local other = beside_lock(counter)
    if other then
      return other
    end
  end
  return take(lock, counter, marker, owner, desc, ttl, guard, last, free, others and ENLISTED)
end
local prefix = owner .. '\n'
if string.sub(v, 1, #prefix) == prefix then
  -- A retry of an attempt whose reply was lost: the same grant again.
  redis.call('PEXPIRE', lock, ttl)
  return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
end
if is_writer(v) then
  return mismatch('rw')
end
local reply = refused(lock, v, ENLISTED)
enlist(string.match(v, '^[^\n]*\n(%d+)'), -reply)
return reply
