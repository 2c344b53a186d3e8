-- Read a fenced value. KEYS[1] hash written by set.lua.
-- Returns {value, token}; both are nil (false) if the key does not exist.
return redis.call('HMGET', KEYS[1], 'value', 'token')
