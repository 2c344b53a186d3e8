-- Delete the lock if, and only if, the owner holds it, and wake the waiters:
-- the message names the oldest live fair waiter, whose turn it is, or
-- nobody (every waiter may try). A writer of a read-write lock that gave up
-- waiting withdraws its claim on the readers.
-- KEYS[1] lock key, KEYS[2] fair queue, KEYS[3] fair places, KEYS[4] the
-- waiting writer, KEYS[5] the release receipt
-- ARGV[1] owner, ARGV[2] release channel, ARGV[3] the call's id, ARGV[4] how
-- long the receipt lasts, in ms
-- Returns 1 when released (by this call, or by its first sending when this
-- is a repeat after a lost reply), 0 when the owner did not hold it.
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. '\n'
local call = prefix .. ARGV[3]
if v and string.sub(v, 1, #prefix) == prefix then
  redis.call('DEL', KEYS[1])
  -- The receipt lets a repeat of this call, sent again because its reply
  -- was lost, report the release it made. A later releaser overwrites it.
  redis.call('SET', KEYS[5], call, 'PX', ARGV[4])
  redis.call('PUBLISH', ARGV[2], live_head(KEYS[2], KEYS[3]) or '')
  return 1
end
if redis.call('GET', KEYS[5]) == call then
  return 1
end
if redis.call('GET', KEYS[4]) == ARGV[1] then
  redis.call('DEL', KEYS[4])
  redis.call('PUBLISH', ARGV[2], '')
end
return 0
