-- Shared by the scripts that grant re-entrant leases; prepended to them.
-- A re-entrant lease's holds are a hash beside its lock key (owner -> 1),
-- with the lease's TTL.

-- first_hold records owner as the only hold of a lease just taken for ttl
-- ms.
local function first_hold(holds, owner, ttl)
  redis.call('DEL', holds)
  redis.call('HSET', holds, owner, 1)
  redis.call('PEXPIRE', holds, ttl)
end

-- add_hold adds owner's hold to the lease on lock, whose value is v, or
-- finds it again after a lost reply (HSET then adds nothing), and returns
-- the lease's token. The lease is the holds': never shortened while
-- another hold may rely on it.
local function add_hold(lock, holds, owner, ttl, v)
  ttl = tonumber(ttl)
  redis.call('HSET', holds, owner, 1)
  if redis.call('HLEN', holds) > 1 then
    ttl = math.max(ttl, redis.call('PTTL', lock))
  end
  redis.call('PEXPIRE', lock, ttl)
  redis.call('PEXPIRE', holds, ttl)
  return tonumber(string.match(v, '^[^\n]*\n(%d+)'))
end
