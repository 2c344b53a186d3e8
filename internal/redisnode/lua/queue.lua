-- Shared by the scripts that read the fair queue; prepended to them.
--
-- A waiter's place (in the places hash) is its deadline in ms, after which
-- it counts as gone, and, when its client takes grants by message (see
-- release.lua), LF TTL ms LF the longest lease such a grant may have
-- (the place's length) LF the client's stamp of its latest attempt LF its
-- holder description.

-- deadline returns the deadline of the place rec, 0 for none.
local function deadline(rec)
  return tonumber(rec and string.match(rec, '^%d+') or '0')
end

-- leave_line takes owner out of the line, granted, and reports whether
-- others still wait in it (the lease then must wake the next).
local function leave_line(queue, places, owner)
  redis.call('ZREM', queue, owner)
  redis.call('HDEL', places, owner)
  return redis.call('ZCARD', queue) > 0
end

-- live_head drops the waiters at the head of the queue whose place lapsed
-- (they stopped trying) and returns the first live one and its place, and
-- the server's time in µs and in ms; or nil.
local function live_head(queue, places)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head then
    return nil
  end
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  local now = math.floor(us / 1000)
  while head do
    local rec = redis.call('HGET', places, head)
    if deadline(rec) > now then
      return head, rec, us, now
    end
    redis.call('ZREM', queue, head)
    redis.call('HDEL', places, head)
    head = redis.call('ZRANGE', queue, 0, 0)[1]
  end
  return nil
end
