-- Describe the lock without changing it.
-- KEYS[1] lock key, KEYS[2] fencing counter
-- Returns {value or false, remaining TTL in ms, last fencing token or false}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
