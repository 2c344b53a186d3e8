-- Store a value with its fencing token unless a higher token is stored.
-- KEYS[1] hash with fields value and token; ARGV[1] value, ARGV[2] token in
-- canonical decimal. Tokens are compared as decimal strings, by length and
-- then by digits, because Lua numbers lose precision above 2^53.
-- Returns {1, token} when stored, {0, stored token} when stale.
local cur = redis.call('HGET', KEYS[1], 'token')
if cur then
  if not string.match(cur, '^0$') and not string.match(cur, '^[1-9]%d*$') then
    return redis.error_reply('fence: ' .. KEYS[1] .. ' holds a malformed token')
  end
  local t = ARGV[2]
  if #t < #cur or (#t == #cur and t < cur) then
    return {0, cur}
  end
end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'token', ARGV[2])
return {1, ARGV[2]}
