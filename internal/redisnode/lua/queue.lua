-- Shared by the scripts that read the fair queue; prepended to them.
-- live_head drops the waiters at the head of the queue whose place lapsed
-- (they stopped trying) and returns the first live one, or nil.
local function live_head(queue, places)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head then
    return nil
  end
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  while head do
    if tonumber(redis.call('HGET', places, head) or '0') > now then
      return head
    end
    redis.call('ZREM', queue, head)
    redis.call('HDEL', places, head)
    head = redis.call('ZRANGE', queue, 0, 0)[1]
  end
  return nil
end
