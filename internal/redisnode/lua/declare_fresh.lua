-- Mark the server's current life as one that follows no loss of data (see
-- token.lua). KEYS[1] restart guard marker. Returns the life's run id.
local life = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
redis.call('SET', KEYS[1], life)
return life
