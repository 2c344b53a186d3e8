-- Take the lock in first-come, first-served order; with a re-entrant
-- identity, as a re-entrant lease (see acquire_reentrant.lua) whose first
-- hold waits its turn and whose further holds are granted at once.
-- Keys: lock, counter (fencing), queue (sorted set of waiting owners by
-- arrival), places (hash: owner -> its place, see queue.lua, and the
-- arrival counter under a name no owner has), marker (the restart
-- guard's), holds (a re-entrant lease's).
-- Arguments: owner, ttl (ms), desc (the holder's description), place (how
-- long, in ms, the owner keeps its place without another attempt; 0: an
-- attempt that does not queue), stamp (the client's stamp of this attempt,
-- by which it takes a grant the release of the lock hands it, see
-- release.lua; '' for a client that does not), reentry (the re-entrant
-- identity or ''), guard (see token.lua).
-- Returns as acquire.lua: the token (> 0), or minus the holder's remaining
-- TTL in ms (at least 1), or 0 when the lock is free but others queued
-- first (their turn ends with a notification, not at a known time), or
-- the restart guard's refusal "guard MS" (see token.lua), or
-- mismatch's reply (see kind.lua), which keeps no place. An owner held
-- back by the guard keeps its place in the queue.
--
-- The fast path, before the helpers are built: a free lock that nobody
-- queues for, whose records are quiet (see take_quiet in prelude.lua),
-- taken without a re-entrant identity.
local r = redis.call('MGET', lock, counter)
if r[1] and is_free(r[1]) and reentry == '' and redis.call('EXISTS', queue) == 0 then
  local token = take_quiet(lock, counter, r, owner, desc, ttl, guard)
  if token then
    return token
  end
end
--[[helpers]]
local holder = owner
if reentry ~= '' then
  holder = '*' .. reentry
end
local prefix = holder .. '\n'
local v, last, quiet, free = records(lock, counter, r)
if v and string.sub(v, 1, #prefix) == prefix then
  if reentry ~= '' then
    return add_hold(lock, holds, owner, ttl, v)
  end
  redis.call('PEXPIRE', lock, ttl)
  return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
end
local other
if v then
  if is_writer(v) then
    other = mismatch('rw')
  end
elseif not quiet then
  other = beside_lock(counter)
end
if other then
  return other
end
local us, now = clock()
-- Waiters whose place lapsed (they stopped trying) leave the head, when
-- the lock is free and the head decides who takes it. While it is held,
-- the release drops them (live_head in queue.lua).
local head
if not v then
  head = redis.call('ZRANGE', queue, 0, 0)[1]
  while head do
    if deadline(redis.call('HGET', places, head)) > now then
      break
    end
    redis.call('ZREM', queue, head)
    redis.call('HDEL', places, head)
    head = redis.call('ZRANGE', queue, 0, 0)[1]
  end
end
local guarded = 0
if not v and (not head or head == owner) then
  local fence, text = issue(counter, marker, us, guard, last, true)
  if fence then
    local mark = head and leave_line(queue, places, owner) and WAITED
    redis.call('SET', lock, lease(holder, text, now .. carry(free), desc, mark), 'PX', ttl)
    if reentry ~= '' then
      first_hold(holds, owner, ttl)
    end
    return fence
  end
  guarded = text
end
place = tonumber(place)
if place > 0 then
  if not redis.call('ZSCORE', queue, owner) then
    redis.call('ZADD', queue, redis.call('HINCRBY', places, '\narrivals', 1), owner)
  end
  local rec = now + place
  if stamp ~= '' then
    rec = rec .. '\n' .. ttl .. '\n' .. place .. '\n' .. stamp .. '\n' .. desc
  end
  redis.call('HSET', places, owner, rec)
  -- The queue outlives its last active waiter by one place's length.
  redis.call('PEXPIRE', queue, place)
  redis.call('PEXPIRE', places, place)
end
if guarded > 0 then
  return guard_refusal(guarded)
end
if not v then
  return 0
end
return refused(lock, v)
