-- Store a value with its fencing token unless a higher token is stored, or
-- the same token from another holder.
-- KEYS[1] hash with fields value, token and holder; ARGV[1] value, ARGV[2]
-- token in canonical decimal, ARGV[3] (optional) the writer's holder id.
-- Tokens are compared as decimal strings, by length and then by digits,
-- because Lua numbers lose precision above 2^53.
-- Returns {1, token} when stored, {0, stored token} when stale, and
-- {2, stored token, stored holder} when the token is the stored one but
-- the holder is not.
local holder = ARGV[3] or ''
local stored = redis.call('HMGET', KEYS[1], 'token', 'holder')
local cur, who = stored[1], stored[2] or ''
local t = ARGV[2]
if cur then
  if not string.match(cur, '^0$') and not string.match(cur, '^[1-9]%d*$') then
    return redis.error_reply('redisfence: ' .. KEYS[1] .. ' holds a malformed token')
  end
  if #t < #cur or (#t == #cur and t < cur) then
    return {0, cur}
  end
  if t == cur then
    if holder ~= '' and who ~= '' and holder ~= who then
      return {2, cur, who}
    end
    if holder == '' then
      holder = who
    end
  end
end
if holder ~= '' then
  redis.call('HSET', KEYS[1], 'value', ARGV[1], 'token', t, 'holder', holder)
else
  redis.call('HSET', KEYS[1], 'value', ARGV[1], 'token', t)
  redis.call('HDEL', KEYS[1], 'holder')
end
return {1, t}
