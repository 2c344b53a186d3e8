-- Pass on a wake-up that named a client (see wake_one in release.lua)
-- with no waiter left for the lock: its waiter gave up, or took the lock
-- another way. The wake-up goes to the client enlisted next, if the lock
-- is still free; if it is held again, its lease is marked as waited for
-- while others are enlisted, so that its release wakes the next.
-- Keys: lock, waiters (the enlisted clients, see acquire.lua).
-- Arguments: channel (to publish on), client (the id of the client that
-- passes; enlisted again meanwhile, it is passed over once more).
-- Returns 1 when it woke a client, else 0.
local v = redis.call('GET', lock)
if v and not is_free(v) then
  if not waited(v) and redis.call('EXISTS', waiters) == 1 then
    redis.call('SET', lock, v .. WAITED, 'KEEPTTL')
  end
  return 0
end
local first = redis.call('ZPOPMIN', waiters)[1]
if first == client then
  first = redis.call('ZPOPMIN', waiters)[1]
end
if first then
  redis.call('PUBLISH', channel, '>' .. first)
  return 1
end
return 0
