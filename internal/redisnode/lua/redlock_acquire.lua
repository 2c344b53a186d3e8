-- Redlock's acquire: acquire.lua, after a fast path of its own for a free
-- lock whose records are quiet (see take_quiet in prelude.lua), and for a
-- lease of another owner already marked as waited for. The fast path is
-- for attempts that enlist no client (the key waiters and the
-- argument client left off); an attempt at the key's gate node that names
-- its client goes to acquire.lua, which enlists it (and refuses at once
-- an attempt that yields, see redisnode.Yields).
-- The reply is acquire.lua's.
--
-- Redlock's token grain is coarse (100ms, redlock.TokenGrain), so
-- take_quiet would write the fencing counter on every grant: the lease of
-- a token the floor gave might end before the floor passes it. Here the
-- lease itself keeps the token whenever it outlives the floor's passing:
-- the token is below the next floor step and the lease's TTL reaches past
-- that step with a millisecond to spare. Its release then leaves the free
-- record, which keeps the token COUNTER_LIFE more, far longer than a
-- grain. (Redlock's Refresh never cuts a lease below a grain and 2ms, for
-- the same reason.) Otherwise the counter is written, as take_quiet does.
local rl = client == nil and redis.call('MGET', lock, counter) or {}
local rl_found = rl[1]
local rl_grain = tonumber(string.match(guard, '^%d+'))
if rl_found and is_free(rl_found) and rl_grain > 0 and rl_grain < COUNTER_LIFE * 1000 then
  local last = tonumber(string.match(rl_found, '\n(%d+)$'))
  if last and not (rl[2] and tonumber(rl[2]) > last) then
    local t = redis.call('TIME')
    local us = t[1] * 1000000 + t[2]
    local step = us - us % rl_grain + rl_grain
    local token = math.max(last + 1, step - rl_grain)
    local text = string.format('%.0f', token)
    if token >= step or (step - us) + 1000 > tonumber(ttl) * 1000 then
      redis.call('SET', counter, text, 'PX', counter_life(token, us, rl_grain))
    end
    redis.call('SET', lock, owner .. '\n' .. text .. '\n' .. math.floor(us / 1000) .. carry(rl_found) .. '\n' .. desc, 'PX', ttl)
    return token
  end
elseif rl_found and (string.sub(rl_found, -#ENLISTED) == ENLISTED or string.sub(rl_found, -#WAITED) == WAITED
    and string.sub(rl_found, -#WRITER - #WAITED) ~= WRITER .. WAITED) and string.sub(rl_found, 1, #owner + 1) ~= owner .. '\n' then
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then
    return 0
  end
  return -math.max(1, pttl)
end
