-- Take the lock in first-come, first-served order; with a re-entrant
-- identity, as a re-entrant lease (see acquire_reentrant.lua) whose first
-- hold waits its turn and whose further holds are granted at once.
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] queue (sorted set of
-- waiting owners by arrival), KEYS[4] places (hash: owner -> deadline ms,
-- and the arrival counter under a name no owner has), KEYS[5] restart
-- guard marker, KEYS[6] a re-entrant lease's holds
-- ARGV[1] owner, ARGV[2] TTL in ms, ARGV[3] holder description,
-- ARGV[4] how long the owner keeps its place without another attempt, in ms
-- (0: an attempt that does not queue), ARGV[5] the client's stamp of this
-- attempt, by which it takes a grant the release of the lock hands it
-- (see release.lua), or '' for a client that does not, ARGV[6] the
-- re-entrant identity or '', then the token grain and the guard's maximum
-- lease as one (see token.lua)
-- Returns as acquire.lua: the token (> 0), or minus the holder's remaining
-- TTL in ms (at least 1), or 0 when the lock is free but others queued
-- first (their turn ends with a notification, not at a known time), or
-- the restart guard's refusal "guard MS" (see token.lua), or
-- mismatch's reply (see kind.lua), which keeps no place. An owner held
-- back by the guard keeps its place in the queue.
local owner, reentry = ARGV[1], ARGV[6]
local holder = owner
if reentry ~= '' then
  holder = '*' .. reentry
end
local prefix = holder .. '\n'
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #prefix) == prefix then
  if reentry ~= '' then
    return add_hold(KEYS[1], KEYS[6], owner, ARGV[2], v)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
end
local other
if v then
  if is_writer(v) then
    other = mismatch('rw')
  end
else
  other = beside_lock(KEYS[2])
end
if other then
  return other
end
local us, now = clock()
-- Waiters whose place lapsed (they stopped trying) leave the head.
local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
while head do
  if deadline(redis.call('HGET', KEYS[4], head)) > now then
    break
  end
  redis.call('ZREM', KEYS[3], head)
  redis.call('HDEL', KEYS[4], head)
  head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
end
local guarded = 0
if not v and (not head or head == owner) then
  local fence, text = issue(KEYS[2], KEYS[5], us)
  if fence then
    local others = head and leave_line(KEYS[3], KEYS[4], owner)
    redis.call('SET', KEYS[1], lease(holder, text, now, ARGV[3], others), 'PX', ARGV[2])
    if reentry ~= '' then
      first_hold(KEYS[6], owner, ARGV[2])
    end
    return fence
  end
  guarded = text
end
local place = tonumber(ARGV[4])
if place > 0 then
  if not redis.call('ZSCORE', KEYS[3], owner) then
    redis.call('ZADD', KEYS[3], redis.call('HINCRBY', KEYS[4], '\narrivals', 1), owner)
  end
  local rec = now + place
  if ARGV[5] ~= '' then
    rec = rec .. '\n' .. ARGV[2] .. '\n' .. place .. '\n' .. ARGV[5] .. '\n' .. ARGV[3]
  end
  redis.call('HSET', KEYS[4], owner, rec)
  -- The queue outlives its last active waiter by one place's length.
  redis.call('PEXPIRE', KEYS[3], place)
  redis.call('PEXPIRE', KEYS[4], place)
end
if guarded > 0 then
  return guard_refusal(guarded)
end
if not v then
  return 0
end
return refused(KEYS[1], v)
